package driver

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type fakeOp struct{ written int }

func newFakeTable() *opTable[*fakeOp] { return newOpTable(func() *fakeOp { return new(fakeOp) }) }

func TestOpLifecycle(t *testing.T) {
	tb := newFakeTable()
	id, p := tb.prepare()
	assert.NotZero(t, id, "an opID is never 0 (AFD needs a non-null ApcContext)")
	assert.Equal(t, opPrepared, tb.state(id))
	require.NoError(t, tb.submit(id))
	assert.Equal(t, 1, tb.inFlight())
	assert.Error(t, tb.submit(id), "double submit")
	assert.Error(t, tb.retire(id), "retiring a submitted op would free kernel-owned memory")

	got, cancelled, v := tb.complete(id)
	assert.Equal(t, opOK, v)
	assert.False(t, cancelled)
	assert.Same(t, p, got)
	assert.Equal(t, 0, tb.inFlight())

	_, _, v = tb.complete(id)
	assert.Equal(t, opDuplicate, v, "second packet before retirement")
	require.NoError(t, tb.retire(id))
	_, _, v = tb.complete(id)
	assert.Equal(t, opStray, v, "packet after retirement: generation moved on")
	assert.Error(t, tb.retire(id))

	id2, p2 := tb.prepare()
	assert.Same(t, p, p2, "memory reused only after retirement")
	assert.Equal(t, id.slot(), id2.slot())
	assert.NotEqual(t, id.gen(), id2.gen())
	_, _, v = tb.complete(id2)
	assert.Equal(t, opStray, v, "a packet for a prepared, never submitted op")
}

func TestOpNeverReusesInFlightMemory(t *testing.T) {
	tb := newFakeTable()
	a, pa := tb.prepare()
	require.NoError(t, tb.submit(a))
	b, pb := tb.prepare()
	assert.NotSame(t, pa, pb)
	assert.NotEqual(t, a.slot(), b.slot())
}

func TestOpCancelAndFail(t *testing.T) {
	tb := newFakeTable()
	id, _ := tb.prepare()
	assert.False(t, tb.cancel(id), "nothing to cancel before submission")
	require.NoError(t, tb.submit(id))
	assert.True(t, tb.cancel(id))
	assert.False(t, tb.cancel(id), "cancel is requested once")
	assert.Equal(t, opSubmitted, tb.state(id), "cancelling does not release the memory")
	_, cancelled, v := tb.complete(id)
	assert.Equal(t, opOK, v)
	assert.True(t, cancelled)
	require.NoError(t, tb.retire(id))

	id, _ = tb.prepare()
	require.NoError(t, tb.submit(id))
	require.NoError(t, tb.failed(id), "synchronous failure: no packet will come")
	assert.Equal(t, opFree, tb.state(id))
	assert.Equal(t, 0, tb.inFlight())
	assert.Error(t, tb.failed(id))
}

func TestOpStrayIDs(t *testing.T) {
	tb := newFakeTable()
	for _, id := range []opID{0, 1, makeOpID(5, 1), makeOpID(0, 0), ^opID(0)} {
		_, _, v := tb.complete(id)
		assert.Equal(t, opStray, v, "%#x", uint64(id))
	}
}

func TestOpAbandonAndFIFO(t *testing.T) {
	tb := newFakeTable()
	var ids []opID
	for i := 0; i < 3; i++ {
		id, _ := tb.prepare()
		ids = append(ids, id)
	}
	require.NoError(t, tb.submit(ids[0]))
	for _, id := range ids[1:] {
		require.NoError(t, tb.failed(id))
	}
	// FIFO reuse: slot 1 was freed first, so it comes back first.
	id, _ := tb.prepare()
	assert.Equal(t, ids[1].slot(), id.slot())

	var kept []*fakeOp
	tb.eachSubmitted(func(id opID, p *fakeOp) { assert.Equal(t, ids[0], id) })
	tb.abandon(func(p *fakeOp) { kept = append(kept, p) })
	assert.Len(t, kept, 1)
	assert.Zero(t, tb.inFlight())
}

// FuzzOpTable drives the table with arbitrary operation sequences and checks
// it against a model: no panic, inFlight matches, a submitted op's memory is
// never handed out again, and each submission completes OK exactly once.
func FuzzOpTable(f *testing.F) {
	f.Add([]byte{0, 1, 3, 3, 4, 0, 1, 2, 3, 4})
	f.Add([]byte{0, 0, 0, 1, 1, 5, 3, 3, 3, 4, 4, 6, 7})
	f.Fuzz(func(t *testing.T, prog []byte) {
		tb := newFakeTable()
		type model struct {
			id     opID
			p      *fakeOp
			st     opState
			okSeen int
		}
		var live []*model
		owner := map[*fakeOp]*model{}
		for i := 0; i+1 < len(prog); i += 2 {
			op, arg := prog[i]%8, int(prog[i+1])
			var m *model
			if len(live) > 0 {
				m = live[arg%len(live)]
			}
			switch op {
			case 0:
				id, p := tb.prepare()
				if o := owner[p]; o != nil && (o.st == opSubmitted || o.st == opCompleted || o.st == opPrepared) {
					t.Fatalf("memory of live op %#x (%v) handed out again", uint64(o.id), o.st)
				}
				nm := &model{id: id, p: p, st: opPrepared}
				owner[p] = nm
				live = append(live, nm)
			case 1:
				if m != nil {
					err := tb.submit(m.id)
					if (err == nil) != (m.st == opPrepared) {
						t.Fatalf("submit in %v: %v", m.st, err)
					}
					if err == nil {
						m.st = opSubmitted
					}
				}
			case 2:
				if m != nil && tb.cancel(m.id) && m.st != opSubmitted {
					t.Fatalf("cancel accepted in %v", m.st)
				}
			case 3:
				if m != nil {
					_, _, v := tb.complete(m.id)
					switch {
					case m.st == opSubmitted && v != opOK,
						m.st == opCompleted && v != opDuplicate,
						(m.st == opPrepared || m.st == opFree) && v != opStray:
						t.Fatalf("complete in %v gave %v", m.st, v)
					}
					if v == opOK {
						m.st = opCompleted
						m.okSeen++
					}
				}
			case 4:
				if m != nil {
					err := tb.retire(m.id)
					if (err == nil) != (m.st == opCompleted) {
						t.Fatalf("retire in %v: %v", m.st, err)
					}
					if err == nil {
						m.st = opFree
					}
				}
			case 5:
				if m != nil {
					err := tb.failed(m.id)
					if (err == nil) != (m.st == opPrepared || m.st == opSubmitted) {
						t.Fatalf("failed in %v: %v", m.st, err)
					}
					if err == nil {
						m.st = opFree
					}
				}
			case 6: // a packet with an arbitrary id
				id := opID(uint64(arg)<<32 | uint64(arg%7))
				var target *model
				for _, x := range live {
					if x.id == id && x.st != opFree {
						target = x
					}
				}
				_, _, v := tb.complete(id)
				if target == nil && v != opStray {
					t.Fatalf("unknown id %#x gave %v", uint64(id), v)
				}
				if target != nil && v == opOK {
					target.st = opCompleted
					target.okSeen++
				}
			case 7:
				if m != nil {
					assert.Equal(t, m.st, tb.state(m.id))
				}
			}
			sub := 0
			for _, x := range live {
				if x.st == opSubmitted {
					sub++
				}
				if x.okSeen > 1 {
					t.Fatalf("op %#x completed OK twice", uint64(x.id))
				}
			}
			if sub != tb.inFlight() {
				t.Fatalf("inFlight %d, model %d", tb.inFlight(), sub)
			}
		}
	})
}
