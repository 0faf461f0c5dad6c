package sched

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

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
		require.True(t, h.s.BindFD(tok, 4, R, NotReady))
		h.check()
		assert.Equal(t, 0, h.s.Reserved())
		assert.Equal(t, 1, h.s.Stats().PendingWaits)
		assert.Empty(t, h.poll())
		h.drv.Script(h.event(4, R))
		assert.Equal(t, []Completion{{tok, int64(R)}}, h.poll())
		assert.False(t, h.s.BindFD(tok, 4, R, NotReady), "bound once only")
	})
}

func TestBindFDReadyAtOnceFinishesInTheNextPoll(t *testing.T) {
	h := newHarness(t, true)
	// an edge that arrived with nobody waiting is cached
	tok := h.waitFD(4, R, -1, NotReady)
	require.True(t, h.s.Cancel(tok))
	h.drv.Script(h.event(4, R))
	assert.Empty(t, h.poll())
	res := h.reserve()
	require.True(t, h.s.BindFD(res, 4, R, Drained))
	h.check()
	assert.Equal(t, []Completion{{res, int64(R)}}, h.poll())
}

func TestBindFDAfterCancelIsSkipped(t *testing.T) {
	h := newHarness(t, true)
	tok := h.reserve()
	require.True(t, h.s.Cancel(tok))
	h.check()
	assert.Equal(t, 0, h.s.Reserved())
	assert.False(t, h.s.BindFD(tok, 4, R, NotReady))
	assert.Empty(t, h.drv.arms(), "nothing armed for a cancelled wait")
	// the slot is reused with a new generation: the old token stays dead
	again := h.reserve()
	assert.Equal(t, tok.Slot(), again.Slot())
	assert.False(t, h.s.BindFD(tok, 4, R, NotReady))
	assert.False(t, h.s.BindFD(h.park(-1), 4, R, NotReady), "a plain park is not reserved")
}

func TestBindFDFailures(t *testing.T) {
	h := newHarness(t, true)
	h.drv.armErr[5] = unix.EBADF
	closed := h.reserve()
	require.True(t, h.s.BindFD(closed, 5, W, NotReady))
	h.drv.armErr[6] = errors.New("boom")
	other := h.reserve()
	require.True(t, h.s.BindFD(other, 6, W, NotReady))
	h.drv.notPollable[7] = true
	file := h.reserve()
	require.True(t, h.s.BindFD(file, 7, R, NotReady))
	h.check()
	assert.Equal(t, []Completion{{closed, ResultClosed}, {other, int64(W)}, {file, int64(R)}}, h.poll())
}

func TestForgetFDWakesBoundWaits(t *testing.T) {
	h := newHarness(t, true)
	tok := h.reserve()
	require.True(t, h.s.BindFD(tok, 4, R, NotReady))
	require.NoError(t, h.s.ForgetFD(4))
	assert.Equal(t, []Completion{{tok, ResultClosed}}, h.poll())
}
