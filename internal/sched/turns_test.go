package sched

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A fiber giving the loop a turn runs again after the timers that fell due
// meanwhile, where a plain Yield runs before them.
func TestYieldLastFinishesBehindDueTimers(t *testing.T) {
	h := newHarness(t, false)
	timer := h.park(time.Millisecond)
	h.clock.Advance(2 * time.Millisecond)
	last, err := h.s.YieldLast()
	require.NoError(t, err)
	plain, err := h.s.Yield()
	require.NoError(t, err)
	h.check()

	got := h.poll()
	assert.Equal(t, []Token{plain, timer, last}, tokens(got))
	assert.Equal(t, ResultWoken, got[2].Result)
	assert.Empty(t, h.poll(), "finished once")
}

// A YieldLast wait counts as ready work: the poll that finishes it must not block.
func TestYieldLastMakesThePollNonBlocking(t *testing.T) {
	h := newHarness(t, false)
	_, err := h.s.YieldLast()
	require.NoError(t, err)
	assert.Equal(t, time.Duration(0), h.s.BeginPoll())
	h.s.EndPoll(nil)
	out := make([]Completion, 4)
	assert.Equal(t, 1, h.s.Drain(out))
	h.check()
}

// Cancelled before the poll (the fiber raised): nothing is delivered, and
// a slot reused meanwhile is not finished by the stale entry.
func TestYieldLastCancelled(t *testing.T) {
	h := newHarness(t, false)
	tok, err := h.s.YieldLast()
	require.NoError(t, err)
	assert.True(t, h.s.Cancel(tok))
	h.check()
	reused := h.park(-1)
	assert.Empty(t, h.poll())
	assert.True(t, h.s.Wake(reused), "the reused slot is still parked")
	assert.Equal(t, []Token{reused}, tokens(h.poll()))
}

func TestYieldLastAfterClose(t *testing.T) {
	h := newHarness(t, false)
	require.NoError(t, h.s.Close())
	_, err := h.s.YieldLast()
	assert.ErrorIs(t, err, ErrClosed)
}
