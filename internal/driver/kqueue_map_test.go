package driver

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestKqueueEvents(t *testing.T) {
	rwh := Readable | Writable | Hangup
	for _, c := range []struct {
		in   kqRaw
		want Events
	}{
		{kqRaw{filter: kqRead}, Readable},
		{kqRaw{filter: kqWrite}, Writable},
		{kqRaw{filter: kqRead, eof: true}, rwh},
		{kqRaw{filter: kqWrite, eof: true}, rwh},
		{kqRaw{filter: kqRead, err: true}, rwh},
		{kqRaw{filter: kqWrite, err: true}, rwh},
		{kqRaw{filter: kqProc}, Readable | Hangup},
		{kqRaw{filter: kqWake}, 0},
		{kqRaw{filter: kqOther, eof: true}, 0},
	} {
		assert.Equal(t, c.want, kqueueEvents(c.in), "%+v", c.in)
	}
}

func TestMergeKevents(t *testing.T) {
	var seqs kqSeqs
	seqs.set(3, 30)
	seqs.set(5, 50)
	seqs.watch(1234, 7)
	raw := []kqRaw{
		{ident: 3, filter: kqRead},
		{ident: 9, filter: kqRead}, // not armed: dropped
		{ident: 0, filter: kqWake},
		{ident: 5, filter: kqWrite},
		{ident: 3, filter: kqWrite}, // merged into fd 3's Event
		{ident: 1234, filter: kqProc},
		{ident: 4321, filter: kqProc}, // not watched: dropped
	}
	out := make([]Event, len(raw))
	n, woke := mergeKevents(raw, &seqs, out)
	assert.True(t, woke)
	assert.Equal(t, []Event{
		{FD: 3, Seq: 30, Events: Readable | Writable},
		{FD: 5, Seq: 50, Events: Writable},
		{FD: -1234, Seq: 7, Events: Readable | Hangup},
	}, out[:n])
	pid, ok := ProcessEvent(out[2])
	assert.True(t, ok)
	assert.Equal(t, 1234, pid)
	_, ok = ProcessEvent(out[0])
	assert.False(t, ok)

	// A process exits once; a later batch does not merge into stale slots.
	n, woke = mergeKevents([]kqRaw{{ident: 1234, filter: kqProc}, {ident: 5, filter: kqRead}}, &seqs, out)
	assert.False(t, woke)
	assert.Equal(t, []Event{{FD: 5, Seq: 50, Events: Readable}}, out[:n])

	seqs.clear(3)
	n, _ = mergeKevents([]kqRaw{{ident: 3, filter: kqRead}}, &seqs, out)
	assert.Zero(t, n, "cleared fd reported")
}

func TestKqSeqsBounds(t *testing.T) {
	var s kqSeqs
	_, ok := s.get(-1)
	assert.False(t, ok)
	_, ok = s.get(1 << 20)
	assert.False(t, ok)
	s.set(1000, 1)
	seq, ok := s.get(1000)
	assert.True(t, ok)
	assert.Equal(t, uint32(1), seq)
	s.clear(-5) // no panic
	s.clear(1 << 20)
}
