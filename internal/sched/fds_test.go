package sched

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/farce-rb/farce/internal/driver"
)

func forBoth(t *testing.T, f func(t *testing.T, persistent bool)) {
	t.Run("persistent", func(t *testing.T) { f(t, true) })
	t.Run("oneshot", func(t *testing.T) { f(t, false) })
}

func TestWaitFDValidation(t *testing.T) {
	h := newHarness(t, true)
	for _, fd := range []int{-1, maxFD, maxFD + 1, 1 << 30, 1<<31 - 1} {
		_, _, err := h.s.WaitFD(fd, R, -1, KnownNotReady)
		assert.Error(t, err, "fd %d", fd)
		assert.Error(t, h.s.ForgetFD(fd), "fd %d", fd)
	}
	assert.Less(t, len(h.s.fds.fds), 1<<10, "the table grew for refused descriptors")
	_, _, err := h.s.WaitFD(3, 0, -1, KnownNotReady)
	assert.Error(t, err, "no events")
	_, _, err = h.s.WaitFD(3, H, -1, KnownNotReady)
	assert.Error(t, err, "hangup is not an event one can ask for")
	_, _, err = h.s.WaitFD(3, R, -1, Readiness(9))
	assert.Error(t, err, "bad readiness")
	assert.NoError(t, ValidateFD(0))
	assert.NoError(t, ValidateFD(maxFD-1))
	assert.Error(t, ValidateFD(-5))
	assert.Error(t, h.s.ForgetFD(-1))
	assert.NoError(t, h.s.ForgetFD(1000), "forgetting an unknown descriptor is fine")
	assert.Empty(t, h.drv.arms())
	h.check()
	assert.Equal(t, 0, h.s.Stats().PendingWaits)
}

func TestWaitFDMasksEvents(t *testing.T) {
	h := newHarness(t, true)
	tok := h.waitFD(4, R|H|0x100, -1, KnownNotReady)
	assert.Equal(t, R, h.s.slots.slots[tok.Slot()].interest)
}

func TestPersistentArmsOncePerSeq(t *testing.T) {
	h := newHarness(t, true)
	h.waitFD(4, R, -1, KnownNotReady)
	h.waitFD(4, W, -1, KnownNotReady)
	h.waitFD(4, R, -1, KnownDrained)
	assert.Equal(t, []armCall{{FD: 4, Seq: 1, Events: driver.RubyMask}}, h.drv.arms())
	assert.Equal(t, 1, h.s.Stats().RegisteredFDs)
}

func TestEdgeHandedToWaiters(t *testing.T) {
	forBoth(t, func(t *testing.T, persistent bool) {
		h := newHarness(t, persistent)
		tok := h.waitFD(4, R, -1, KnownNotReady)
		h.drv.Script(h.event(4, R))
		assert.Equal(t, []Completion{{tok, int64(R)}}, h.poll())
		// The edge went to the waiter: it is not cached for the next wait.
		h.waitFD(4, R, -1, KnownDrained)
	})
}

func TestEdgeCachedWhenNoWaiters(t *testing.T) {
	forBoth(t, func(t *testing.T, persistent bool) {
		h := newHarness(t, persistent)
		tok := h.waitFD(4, R, -1, KnownNotReady)
		require.True(t, h.s.Cancel(tok))
		h.drv.Script(h.event(4, R|W))
		assert.Empty(t, h.poll())
		assert.Equal(t, R, h.readyFD(4, R, KnownDrained), "cached edge, consumed")
		assert.Equal(t, W, h.readyFD(4, W|P, KnownDrained))
		h.waitFD(4, R|W, -1, KnownDrained)
	})
}

func TestPartialEdgeRestIsCached(t *testing.T) {
	forBoth(t, func(t *testing.T, persistent bool) {
		h := newHarness(t, persistent)
		tok := h.waitFD(4, R, -1, KnownNotReady)
		h.drv.Script(h.event(4, R|W))
		assert.Equal(t, []Completion{{tok, int64(R)}}, h.poll())
		assert.Equal(t, W, h.readyFD(4, W, KnownDrained))
	})
}

func TestNotReadyClearsStaleEdges(t *testing.T) {
	forBoth(t, func(t *testing.T, persistent bool) {
		h := newHarness(t, persistent)
		tok := h.waitFD(4, R, -1, KnownNotReady)
		require.True(t, h.s.Cancel(tok))
		h.drv.Script(h.event(4, R|W))
		h.poll()
		// The caller's read just failed with EAGAIN: the cached R edge is stale.
		tok = h.waitFD(4, R, -1, KnownNotReady)
		assert.Empty(t, h.poll())
		// ... but the W edge is not.
		assert.Equal(t, W, h.readyFD(4, W, KnownDrained))
		h.drv.Script(h.event(4, R))
		assert.Equal(t, []Completion{{tok, int64(R)}}, h.poll())
	})
}

func TestDrainedTrustsHangup(t *testing.T) {
	forBoth(t, func(t *testing.T, persistent bool) {
		h := newHarness(t, persistent)
		tok := h.waitFD(4, W, -1, KnownNotReady)
		h.drv.Script(h.event(4, R|W|H))
		assert.Equal(t, []Completion{{tok, int64(W)}}, h.poll())
		for _, known := range []Readiness{KnownDrained, KnownNotReady, KnownNothing} {
			assert.Equal(t, R|P, h.readyFD(4, R|P, known), "after a hang-up every wait finishes at once (%d)", known)
		}
	})
}

func TestHangupWakesEveryWaiter(t *testing.T) {
	forBoth(t, func(t *testing.T, persistent bool) {
		h := newHarness(t, persistent)
		pri := h.waitFD(4, P, -1, KnownNotReady)
		rd := h.waitFD(4, R, -1, KnownNotReady)
		h.drv.Script(h.event(4, R|W|H))
		got := h.poll()
		assert.Equal(t, []Completion{{pri, int64(P)}, {rd, int64(R)}}, got,
			"a waiter for an event the hang-up does not name must not sleep forever")
	})
}

func TestSeveralWaitersOneFD(t *testing.T) {
	forBoth(t, func(t *testing.T, persistent bool) {
		h := newHarness(t, persistent)
		r1 := h.waitFD(4, R, -1, KnownNotReady)
		w1 := h.waitFD(4, W, -1, KnownNotReady)
		rw := h.waitFD(4, R|W, -1, KnownNotReady)
		r2 := h.waitFD(4, R, time.Second, KnownNotReady)
		p1 := h.waitFD(4, P, -1, KnownNotReady)
		assert.Equal(t, int32(5), h.s.fds.lookup(4).waiters)

		h.drv.Script(h.event(4, W))
		assert.Equal(t, []Completion{{w1, int64(W)}, {rw, int64(W)}}, h.poll())
		if !persistent {
			// One-shot: the driver forgot the arm; the remaining interest is armed again.
			assert.Equal(t, armCall{FD: 4, Seq: 1, Events: R | P}, h.drv.arms()[len(h.drv.arms())-1])
		}
		h.drv.Script(h.event(4, R))
		assert.Equal(t, []Completion{{r1, int64(R)}, {r2, int64(R)}}, h.poll(), "an edge goes to every waiter that wants it, in order")
		assert.Equal(t, 0, h.s.Stats().Timers)
		h.drv.Script(h.event(4, P|R))
		assert.Equal(t, []Completion{{p1, int64(P)}}, h.poll())
		assert.Equal(t, R, h.readyFD(4, R, KnownDrained))
	})
}

func TestCancelFDWaiterUnlinks(t *testing.T) {
	forBoth(t, func(t *testing.T, persistent bool) {
		h := newHarness(t, persistent)
		a := h.waitFD(4, R, -1, KnownNotReady)
		b := h.waitFD(4, R, time.Second, KnownNotReady)
		c := h.waitFD(4, R, -1, KnownNotReady)
		assert.False(t, h.s.Wake(b), "Wake is for parks, not descriptor waits")
		require.True(t, h.s.Cancel(b)) // middle
		h.check()
		require.True(t, h.s.Cancel(a)) // head
		h.check()
		d := h.waitFD(4, R, -1, KnownNotReady)
		require.True(t, h.s.Cancel(d)) // tail
		h.check()
		h.drv.Script(h.event(4, R))
		assert.Equal(t, []Completion{{c, int64(R)}}, h.poll())
		assert.Equal(t, int32(-1), h.s.fds.lookup(4).head)
	})
}

func TestFDWaitTimesOut(t *testing.T) {
	forBoth(t, func(t *testing.T, persistent bool) {
		h := newHarness(t, persistent)
		a := h.waitFD(4, R, 10*time.Millisecond, KnownNotReady)
		b := h.waitFD(4, R, -1, KnownNotReady)
		h.clock.Advance(10 * time.Millisecond)
		assert.Equal(t, []Completion{{a, ResultTimedOut}}, h.poll())
		assert.Equal(t, int32(1), h.s.fds.lookup(4).waiters)
		h.drv.Script(h.event(4, R))
		assert.Equal(t, []Completion{{b, int64(R)}}, h.poll())
	})
}

func TestForgetFD(t *testing.T) {
	forBoth(t, func(t *testing.T, persistent bool) {
		h := newHarness(t, persistent)
		a := h.waitFD(4, R, time.Second, KnownNotReady)
		b := h.waitFD(4, W, -1, KnownNotReady)
		other := h.waitFD(5, R, -1, KnownNotReady)
		oldSeq := h.s.fds.lookup(4).seq
		h.drv.resetCalls()

		require.NoError(t, h.s.ForgetFD(4))
		h.check()
		assert.Equal(t, []armCall{{Disarm: true, FD: 4}}, h.drv.calls)
		assert.Equal(t, 0, h.s.Stats().Timers)
		assert.Equal(t, 1, h.s.Stats().RegisteredFDs)
		assert.False(t, h.s.Cancel(makeToken(99, 1)))

		// Events the kernel queued for the old owner arrive late.
		h.drv.Script(driver.Event{FD: 4, Seq: oldSeq, Events: R | W | H})
		assert.Equal(t, []Completion{{a, ResultClosed}, {b, ResultClosed}}, h.poll())

		// The new owner of number 4 starts from scratch under a new seq.
		st := h.s.fds.lookup(4)
		assert.NotEqual(t, oldSeq, st.seq)
		assert.False(t, st.hangup, "the stale hang-up was ignored")
		assert.Zero(t, st.ready)
		c := h.waitFD(4, R, -1, KnownDrained)
		assert.Equal(t, armCall{FD: 4, Seq: st.seq, Events: h.drv.arms()[0].Events}, h.drv.arms()[0])
		h.drv.Script(driver.Event{FD: 4, Seq: oldSeq, Events: R})
		assert.Empty(t, h.poll(), "stale event ignored")
		h.drv.Script(h.event(4, R))
		assert.Equal(t, []Completion{{c, int64(R)}}, h.poll())
		_ = other
	})
}

// SetFDFile: the first file a number is said to name is just noted, the
// same one again changes nothing, another one ends the old file's waits as
// a forget does (and the next wait arms afresh); after a forget the number
// names no known file.
func TestSetFDFile(t *testing.T) {
	forBoth(t, func(t *testing.T, persistent bool) {
		h := newHarness(t, persistent)
		oldFile, newFile := FileID{Dev: 1, Ino: 10}, FileID{Dev: 1, Ino: 11}
		changed, err := h.s.SetFDFile(4, oldFile)
		require.NoError(t, err)
		assert.False(t, changed, "the first file is only noted")
		a := h.waitFD(4, R, -1, KnownNotReady)
		oldSeq := h.s.fds.lookup(4).seq
		h.drv.resetCalls()

		changed, err = h.s.SetFDFile(4, oldFile)
		require.NoError(t, err)
		assert.False(t, changed)
		assert.Empty(t, h.drv.calls, "the same file: nothing to do")

		changed, err = h.s.SetFDFile(4, newFile)
		require.NoError(t, err)
		assert.True(t, changed)
		h.check()
		assert.Equal(t, []armCall{{Disarm: true, FD: 4}}, h.drv.calls)
		h.drv.Script(driver.Event{FD: 4, Seq: oldSeq, Events: R}) // the old file's registration lingers
		assert.Equal(t, []Completion{{a, ResultClosed}}, h.poll())
		b := h.waitFD(4, R, -1, KnownNotReady)
		assert.NotEqual(t, oldSeq, h.drv.arms()[0].Seq, "armed afresh under a new seq")
		h.drv.Script(h.event(4, R))
		assert.Equal(t, []Completion{{b, int64(R)}}, h.poll())

		require.NoError(t, h.s.ForgetFD(4))
		changed, err = h.s.SetFDFile(4, oldFile)
		require.NoError(t, err)
		assert.False(t, changed, "forgotten: no file known")
		_, err = h.s.SetFDFile(-1, oldFile)
		assert.Error(t, err)
		h.check()
	})
}

func TestForgetFDSeqSkipsReserved(t *testing.T) {
	h := newHarness(t, true)
	h.waitFD(4, R, -1, KnownNotReady)
	h.s.fds.lookup(4).seq = ^uint32(0) - 1
	require.NoError(t, h.s.ForgetFD(4))
	assert.Equal(t, uint32(1), h.s.fds.lookup(4).seq)
	h.check()
}

func TestEventsForUnknownDescriptorsIgnored(t *testing.T) {
	h := newHarness(t, true)
	tok := h.waitFD(4, R, -1, KnownNotReady)
	h.drv.Script(
		driver.Event{FD: -1, Seq: 1, Events: R},
		driver.Event{FD: 1 << 20, Seq: 1, Events: R},
		driver.Event{FD: 4, Seq: 77, Events: R},
	)
	assert.Empty(t, h.poll())
	assert.True(t, h.s.Cancel(tok))
}

func TestNotPollableIsAlwaysReady(t *testing.T) {
	forBoth(t, func(t *testing.T, persistent bool) {
		h := newHarness(t, persistent)
		h.drv.notPollable[7] = true
		assert.Equal(t, R|W, h.readyFD(7, R|W, KnownNotReady))
		assert.Len(t, h.drv.arms(), 1)
		assert.Equal(t, R, h.readyFD(7, R, KnownDrained))
		assert.Equal(t, W, h.readyFD(7, W, KnownNothing))
		assert.Len(t, h.drv.arms(), 1, "the answer is remembered")
		assert.Equal(t, 0, h.s.Stats().RegisteredFDs)
		assert.Equal(t, 0, h.s.Stats().PendingWaits)
		// A new owner of the number may be pollable.
		require.NoError(t, h.s.ForgetFD(7))
		delete(h.drv.notPollable, 7)
		h.waitFD(7, R, -1, KnownNotReady)
	})
}

func TestArmErrorIsReturned(t *testing.T) {
	forBoth(t, func(t *testing.T, persistent bool) {
		h := newHarness(t, persistent)
		boom := errors.New("boom")
		h.drv.armErr[7] = boom
		_, _, err := h.s.WaitFD(7, R, time.Second, KnownNotReady)
		assert.ErrorIs(t, err, boom)
		h.check()
		assert.Equal(t, Stats{}, h.s.Stats())
		delete(h.drv.armErr, 7)
		h.waitFD(7, R, -1, KnownNotReady)
	})
}

func TestOneShotRearm(t *testing.T) {
	h := newHarness(t, false)
	r := h.waitFD(4, R, -1, KnownNotReady)
	h.waitFD(4, R, -1, KnownNotReady) // already armed for R: no call
	w := h.waitFD(4, W, -1, KnownNotReady)
	assert.Equal(t, []armCall{{FD: 4, Seq: 1, Events: R}, {FD: 4, Seq: 1, Events: R | W}}, h.drv.arms())
	assert.Equal(t, 1, h.s.Stats().RegisteredFDs)

	h.drv.resetCalls()
	h.drv.Script(h.event(4, R))
	got := h.poll()
	assert.Len(t, got, 2)
	assert.Equal(t, r, got[0].Token)
	assert.Equal(t, []armCall{{FD: 4, Seq: 1, Events: W}}, h.drv.calls, "re-armed for what is still awaited")
	assert.Equal(t, W, h.s.fds.lookup(4).armed)
	assert.Equal(t, 1, h.s.Stats().RegisteredFDs)

	h.drv.resetCalls()
	h.drv.Script(h.event(4, W))
	assert.Equal(t, []Completion{{w, int64(W)}}, h.poll())
	assert.Empty(t, h.drv.calls, "nothing left to wait for: not re-armed")
	assert.Zero(t, h.s.fds.lookup(4).armed)
	assert.Equal(t, 0, h.s.Stats().RegisteredFDs)

	h.waitFD(4, P, -1, KnownNotReady)
	assert.Equal(t, []armCall{{FD: 4, Seq: 1, Events: P}}, h.drv.calls)
	assert.Equal(t, 1, h.s.Stats().RegisteredFDs)
}

func TestOneShotCancelledWaiterLeavesArm(t *testing.T) {
	h := newHarness(t, false)
	tok := h.waitFD(4, R, -1, KnownNotReady)
	require.True(t, h.s.Cancel(tok))
	assert.Equal(t, 1, h.s.Stats().RegisteredFDs)
	h.drv.Script(h.event(4, R))
	assert.Empty(t, h.poll())
	assert.Equal(t, 0, h.s.Stats().RegisteredFDs)
	assert.Equal(t, R, h.readyFD(4, R, KnownDrained))
}

// ---------------------------------------------------------------- KnownNothing: probing real descriptors

// ---------------------------------------------------------------- real drivers

func TestReadHangupOnlyFinishesReads(t *testing.T) {
	forBoth(t, func(t *testing.T, persistent bool) {
		h := newHarness(t, persistent)
		wr := h.waitFD(4, W, -1, KnownNotReady)
		rd := h.waitFD(4, R, -1, KnownNotReady)
		h.drv.Script(h.event(4, R|driver.ReadHangup))
		assert.Equal(t, []Completion{{rd, int64(R)}}, h.poll(), "a half-close wakes readers, not writers")
		assert.Equal(t, R, h.readyFD(4, R, KnownNotReady), "every later read wait finishes at once")
		h.drv.Script(h.event(4, W))
		assert.Equal(t, []Completion{{wr, int64(W)}}, h.poll())
	})
}
