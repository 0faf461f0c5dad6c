package sched

import (
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/farce-rb/farce/internal/driver"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Reserved is how many reserved slots are neither bound nor cancelled
// (tests only: the extension never asks).
func (s *Scheduler) Reserved() int { return s.reserved }

func (h *harness) reserve() Token {
	h.t.Helper()
	tok, err := h.s.Reserve()
	require.NoError(h.t, err)
	require.NotZero(h.t, tok)
	h.check()
	return tok
}

func TestReservedSlotsAreNotPendingWaits(t *testing.T) {
	h := newHarness(t, true)
	a, b := h.reserve(), h.reserve()
	assert.NotEqual(t, a, b)
	assert.Equal(t, 0, h.s.Stats().PendingWaits)
	assert.Equal(t, 2, h.s.Reserved())
	assert.Empty(t, h.poll(), "a reserved slot never finishes on its own")
	assert.Equal(t, time.Duration(-1), h.s.BeginPoll(), "nor does it bound the kernel wait")
}

func TestBindFDWaitsLikeWaitFD(t *testing.T) {
	forBoth(t, func(t *testing.T, persistent bool) {
		h := newHarness(t, persistent)
		tok := h.reserve()
		require.True(t, h.s.BindFD(tok, 4, R, KnownNotReady))
		h.check()
		assert.Equal(t, 0, h.s.Reserved())
		assert.Equal(t, 1, h.s.Stats().PendingWaits)
		assert.Empty(t, h.poll())
		h.drv.Script(h.event(4, R))
		assert.Equal(t, []Completion{{tok, int64(R)}}, h.poll())
		assert.False(t, h.s.BindFD(tok, 4, R, KnownNotReady), "bound once only")
	})
}

func TestBindFDReadyAtOnceFinishesInTheNextPoll(t *testing.T) {
	h := newHarness(t, true)
	// an edge that arrived with nobody waiting is cached
	tok := h.waitFD(4, R, -1, KnownNotReady)
	require.True(t, h.s.Cancel(tok))
	h.drv.Script(h.event(4, R))
	assert.Empty(t, h.poll())
	res := h.reserve()
	require.True(t, h.s.BindFD(res, 4, R, KnownDrained))
	h.check()
	assert.Equal(t, []Completion{{res, int64(R)}}, h.poll())
}

func TestBindFDAfterCancelIsSkipped(t *testing.T) {
	h := newHarness(t, true)
	tok := h.reserve()
	require.True(t, h.s.Cancel(tok))
	h.check()
	assert.Equal(t, 0, h.s.Reserved())
	assert.False(t, h.s.BindFD(tok, 4, R, KnownNotReady))
	assert.Empty(t, h.drv.arms(), "nothing armed for a cancelled wait")
	// the slot is reused with a new generation: the old token stays dead
	again := h.reserve()
	assert.Equal(t, tok.Slot(), again.Slot())
	assert.False(t, h.s.BindFD(tok, 4, R, KnownNotReady))
	assert.False(t, h.s.BindFD(h.park(-1), 4, R, KnownNotReady), "a plain park is not reserved")
}

func TestBindFDFailures(t *testing.T) {
	h := newHarness(t, true)
	h.drv.armErr[5] = syscall.EBADF
	closed := h.reserve()
	require.True(t, h.s.BindFD(closed, 5, W, KnownNotReady))
	h.drv.armErr[6] = errors.New("boom")
	other := h.reserve()
	require.True(t, h.s.BindFD(other, 6, W, KnownNotReady))
	h.drv.notPollable[7] = true
	file := h.reserve()
	require.True(t, h.s.BindFD(file, 7, R, KnownNotReady))
	h.check()
	assert.Equal(t, []Completion{{closed, ResultClosed}, {other, int64(W)}, {file, int64(R)}}, h.poll())
}

func TestForgetFDWakesBoundWaits(t *testing.T) {
	h := newHarness(t, true)
	tok := h.reserve()
	require.True(t, h.s.BindFD(tok, 4, R, KnownNotReady))
	require.NoError(t, h.s.ForgetFD(4))
	assert.Equal(t, []Completion{{tok, ResultClosed}}, h.poll())
}

func TestReservedParkIsWokenBeforeOrAfterBindPark(t *testing.T) {
	h := newHarness(t, true)
	before, after := h.reserve(), h.reserve()
	require.True(t, h.s.BindPark(before))
	h.check()
	assert.Equal(t, 1, h.s.Stats().PendingWaits)
	assert.False(t, h.s.BindPark(before), "bound once only")
	assert.Empty(t, h.poll(), "an untimed park waits for its wake")
	require.True(t, h.s.Wake(after))
	h.check()
	assert.Equal(t, 0, h.s.Reserved())
	assert.False(t, h.s.BindPark(after), "woken before its bind: nothing left to bind")
	assert.False(t, h.s.BindFD(after, 4, R, KnownNotReady))
	require.True(t, h.s.Wake(before))
	assert.Equal(t, []Completion{{after, ResultWoken}, {before, ResultWoken}}, h.poll())
	assert.Equal(t, 0, h.s.Stats().PendingWaits)
}

func TestBoundFDWaitIsNotWoken(t *testing.T) {
	h := newHarness(t, true)
	tok := h.reserve()
	require.True(t, h.s.BindFD(tok, 4, R, KnownNotReady))
	assert.False(t, h.s.Wake(tok), "Wake is for parks, not descriptor waits")
	h.check()
}

// FuzzReserved runs random sequences of Reserve, BindFD, BindPark, Wake,
// Cancel and Poll (descriptor events scripted on the fake driver) and
// checks the scheduler's invariants after each step, plus what the
// extension relies on: a reserved token is handed out by a poll only after
// it was woken or bound and became ready, at most once, never after Cancel.
func FuzzReserved(f *testing.F) {
	f.Add([]byte{0, 0, 1, 2, 3, 5, 5, 4, 5})
	f.Add([]byte{0, 2, 3, 3, 4, 6, 5, 0, 1, 5, 4, 5})
	f.Fuzz(func(t *testing.T, ops []byte) {
		h := newHarness(t, len(ops)%2 == 0)
		type rw struct {
			fd              int // -1: park (or unbound)
			bound, woken    bool
			cancelled, done bool
		}
		waits := map[Token]*rw{}
		var toks []Token
		pick := func(b byte) Token {
			if len(toks) == 0 {
				return 0
			}
			return toks[int(b)%len(toks)]
		}
		for k := 0; k+1 < len(ops); k += 2 {
			op, arg := ops[k]%7, ops[k+1]
			tok := pick(arg)
			w := waits[tok]
			switch op {
			case 0:
				n := h.reserve()
				waits[n] = &rw{fd: -1}
				toks = append(toks, n)
			case 1:
				fd := 4 + int(arg%3)
				got := h.s.BindFD(tok, fd, R, KnownNotReady)
				if w != nil {
					assert.Equal(t, !w.bound && !w.woken && !w.cancelled && !w.done, got)
					if got {
						w.bound, w.fd = true, fd
					}
				}
			case 2:
				got := h.s.BindPark(tok)
				if w != nil {
					assert.Equal(t, !w.bound && !w.woken && !w.cancelled && !w.done, got)
					if got {
						w.bound = true
					}
				}
			case 3:
				got := h.s.Wake(tok)
				if w != nil {
					assert.Equal(t, w.fd < 0 && !w.woken && !w.cancelled && !w.done, got)
					if got {
						w.woken = true
					}
				}
			case 4:
				got := h.s.Cancel(tok)
				if w != nil {
					assert.Equal(t, !w.cancelled && !w.done, got)
					w.cancelled = true
				}
			case 5:
				for _, c := range h.poll() {
					cw := waits[c.Token]
					require.NotNil(t, cw, "a poll handed out a token never reserved")
					assert.False(t, cw.done, "handed out twice")
					assert.False(t, cw.cancelled, "handed out after Cancel")
					if cw.fd < 0 {
						assert.True(t, cw.woken, "an untimed park finishes only by Wake")
						assert.Equal(t, ResultWoken, c.Result)
					} else {
						assert.Equal(t, int64(R), c.Result)
					}
					cw.done = true
				}
			case 6:
				fd := 4 + int(arg%3)
				if st := h.s.fds.lookup(fd); st != nil {
					h.drv.Script(driver.Event{FD: int32(fd), Seq: st.seq, Events: R})
				}
			}
			h.check()
			pending := 0
			for _, w := range waits {
				if !w.cancelled && !w.done && (w.bound || w.woken) {
					pending++
				}
			}
			assert.Equal(t, pending, h.s.Stats().PendingWaits)
		}
	})
}
