package sched

import (
	"errors"
	"math"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/farce-rb/farce/internal/driver"
)

const (
	R = driver.Readable
	P = driver.Priority
	W = driver.Writable
	H = driver.Hangup
)

// EventBuffer is where the driver's Wait stores events between BeginPoll
// and EndPoll, for a test that drives a poll by hand (Poll uses it itself).
func (s *Scheduler) EventBuffer() []driver.Event { return s.events }

type harness struct {
	t     *testing.T
	s     *Scheduler
	drv   *fakeDriver
	clock *fakeClock
}

func newHarness(t *testing.T, persistent bool) *harness {
	t.Helper()
	clock := &fakeClock{now: 1_000_000}
	drv := newFakeDriver(persistent)
	h := &harness{t: t, s: New(drv, clock.Now), drv: drv, clock: clock}
	h.check()
	return h
}

func (h *harness) check() {
	h.t.Helper()
	require.NoError(h.t, h.s.checkInvariants())
}

// poll runs one non-blocking iteration and returns its completions.
func (h *harness) poll() []Completion {
	h.t.Helper()
	out := make([]Completion, 64)
	n, err := h.s.Poll(out, 0, nil)
	require.NoError(h.t, err)
	h.check()
	return out[:n]
}

func (h *harness) park(timeout time.Duration) Token {
	h.t.Helper()
	tok, err := h.s.Park(timeout)
	require.NoError(h.t, err)
	require.NotZero(h.t, tok)
	h.check()
	return tok
}

func (h *harness) yield() Token {
	h.t.Helper()
	tok, err := h.s.Yield()
	require.NoError(h.t, err)
	require.NotZero(h.t, tok)
	h.check()
	return tok
}

// waitFD expects WaitFD to park and returns the token.
func (h *harness) waitFD(fd int, ev Events, timeout time.Duration, known Readiness) Token {
	h.t.Helper()
	tok, got, err := h.s.WaitFD(fd, ev, timeout, known)
	require.NoError(h.t, err)
	require.NotZero(h.t, tok, "WaitFD(%d, %v) was ready at once with %v", fd, ev, got)
	require.Zero(h.t, got)
	h.check()
	return tok
}

// readyFD expects WaitFD to answer at once and returns the events.
func (h *harness) readyFD(fd int, ev Events, known Readiness) Events {
	h.t.Helper()
	tok, got, err := h.s.WaitFD(fd, ev, -1, known)
	require.NoError(h.t, err)
	require.Zero(h.t, tok, "WaitFD(%d, %v) parked", fd, ev)
	require.NotZero(h.t, got)
	h.check()
	return got
}

func (h *harness) event(fd int, ev Events) driver.Event {
	st := h.s.fds.lookup(fd)
	require.NotNil(h.t, st)
	return driver.Event{FD: int32(fd), Seq: st.seq, Events: ev}
}

func tokens(cs []Completion) []Token {
	out := make([]Token, len(cs))
	for i, c := range cs {
		out[i] = c.Token
	}
	return out
}

// ---------------------------------------------------------------- tokens

func TestTokenEncoding(t *testing.T) {
	tok := makeToken(7, 3)
	assert.Equal(t, uint32(7), tok.Slot())
	assert.Equal(t, uint32(3), tok.Gen())
	assert.Equal(t, "7/3", tok.String())
	assert.Equal(t, Token(3<<32|7), tok)
	big := makeToken(math.MaxUint32, math.MaxUint32)
	assert.Equal(t, uint32(math.MaxUint32), big.Slot())
	assert.Equal(t, uint32(math.MaxUint32), big.Gen())
}

func TestFirstTokenIsNotZero(t *testing.T) {
	h := newHarness(t, true)
	tok := h.park(-1)
	assert.Equal(t, uint32(0), tok.Slot())
	assert.Equal(t, uint32(1), tok.Gen())
}

func TestStaleTokenCannotTouchReusedSlot(t *testing.T) {
	h := newHarness(t, true)
	old := h.park(-1)
	require.True(t, h.s.Wake(old))
	require.Equal(t, []Completion{{old, ResultWoken}}, h.poll())
	h.poll() // frees old's slot

	fresh := h.park(-1)
	require.Equal(t, old.Slot(), fresh.Slot(), "freed slot is reused first")
	require.NotEqual(t, old.Gen(), fresh.Gen())

	assert.False(t, h.s.Wake(old), "stale wake")
	assert.False(t, h.s.Cancel(old), "stale cancel")
	h.check()
	assert.Empty(t, h.poll())
	assert.Equal(t, 1, h.s.Stats().PendingWaits)

	assert.True(t, h.s.Wake(fresh))
	assert.Equal(t, []Completion{{fresh, ResultWoken}}, h.poll())
}

func TestStaleCancelAfterCancelledReuse(t *testing.T) {
	h := newHarness(t, true)
	a := h.park(time.Second)
	require.True(t, h.s.Cancel(a))
	b := h.park(time.Second) // reuses the slot at once: a cancelled park is freed immediately
	require.Equal(t, a.Slot(), b.Slot())
	assert.False(t, h.s.Cancel(a))
	assert.False(t, h.s.Wake(a))
	h.clock.Advance(time.Second)
	assert.Equal(t, []Completion{{b, ResultTimedOut}}, h.poll())
}

func TestForeignAndMalformedTokens(t *testing.T) {
	h := newHarness(t, true)
	tok := h.park(-1)
	for _, bad := range []Token{0, makeToken(tok.Slot(), 0), makeToken(tok.Slot(), tok.Gen()+1), makeToken(1, 1), makeToken(math.MaxUint32, 1), Token(math.MaxUint64)} {
		assert.False(t, h.s.Wake(bad), "wake %v", bad)
		assert.False(t, h.s.Cancel(bad), "cancel %v", bad)
	}
	h.check()
	assert.Equal(t, 1, h.s.Stats().PendingWaits)
}

func TestGenerationWrapSkipsZero(t *testing.T) {
	h := newHarness(t, true)
	tok := h.park(-1)
	h.s.slots.slots[tok.Slot()].gen = math.MaxUint32
	tok = makeToken(tok.Slot(), math.MaxUint32)
	require.True(t, h.s.Cancel(tok))
	next := h.park(-1)
	assert.Equal(t, tok.Slot(), next.Slot())
	assert.Equal(t, uint32(1), next.Gen())
	assert.False(t, h.s.Wake(tok))
}

// ---------------------------------------------------------------- ready queue

func TestReadyQueueIsFIFO(t *testing.T) {
	h := newHarness(t, true)
	a := h.park(-1)
	b := h.park(-1)
	c := h.park(-1)
	y1 := h.yield()
	require.True(t, h.s.Wake(c))
	require.True(t, h.s.Wake(a))
	y2 := h.yield()
	require.True(t, h.s.Wake(b))
	got := h.poll()
	assert.Equal(t, []Token{y1, c, a, y2, b}, tokens(got))
	for _, cpl := range got {
		assert.Equal(t, ResultWoken, cpl.Result)
	}
}

func TestDrainBudget(t *testing.T) {
	h := newHarness(t, true)
	var want []Token
	for i := 0; i < 10; i++ {
		want = append(want, h.yield())
	}
	out := make([]Completion, 4)
	var got []Token
	for len(got) < len(want) {
		n, err := h.s.Poll(out, 0, nil)
		require.NoError(t, err)
		require.LessOrEqual(t, n, 4)
		got = append(got, tokens(out[:n])...)
		h.check()
	}
	assert.Equal(t, want, got)
	assert.Equal(t, uint64(10), h.s.Stats().Completed)
}

func TestReadyRingGrowsAcrossWrap(t *testing.T) {
	var r readyRing
	next, expect := uint32(0), uint32(0)
	for round := 0; round < 5; round++ {
		for k := 0; k < 50+round*40; k++ {
			r.push(next)
			next++
		}
		for k := 0; k < 30; k++ {
			i, ok := r.pop()
			require.True(t, ok)
			require.Equal(t, expect, i)
			expect++
		}
	}
	for r.len() > 0 {
		i, _ := r.pop()
		require.Equal(t, expect, i)
		expect++
	}
	require.Equal(t, next, expect)
	_, ok := r.pop()
	assert.False(t, ok)
}

func TestYieldRunsAfterEarlierWaitsAndAfterPoll(t *testing.T) {
	h := newHarness(t, true)
	a := h.park(-1)
	require.True(t, h.s.Wake(a))
	y := h.yield()
	assert.Equal(t, time.Duration(0), h.s.BeginPoll(), "ready work: the driver must not block")
	n, err := h.drv.Wait(h.s.EventBuffer(), 0)
	require.NoError(t, err)
	h.s.EndPoll(h.s.EventBuffer()[:n])
	out := make([]Completion, 8)
	n = h.s.Drain(out)
	assert.Equal(t, []Token{a, y}, tokens(out[:n]))
	assert.False(t, h.s.Wake(y), "a yield cannot be woken")
}

// ---------------------------------------------------------------- timers

func TestTimersFireInDeadlineOrder(t *testing.T) {
	h := newHarness(t, true)
	t30 := h.park(30 * time.Millisecond)
	t10 := h.park(10 * time.Millisecond)
	forever := h.park(-1)
	t20 := h.park(20 * time.Millisecond)
	t20b := h.park(20 * time.Millisecond)
	assert.Equal(t, 4, h.s.Stats().Timers)

	assert.Equal(t, 10*time.Millisecond, h.s.BeginPoll())
	h.s.EndPoll(nil)
	h.clock.Advance(10*time.Millisecond - 1)
	assert.Empty(t, h.poll(), "a timer never fires early")
	assert.Equal(t, []time.Duration{0}, h.drv.timeouts, "non-blocking poll")

	h.clock.Advance(1)
	assert.Equal(t, []Completion{{t10, ResultTimedOut}}, h.poll())

	h.clock.Advance(15 * time.Millisecond) // past both 20ms timers
	got := h.poll()
	assert.ElementsMatch(t, []Completion{{t20, ResultTimedOut}, {t20b, ResultTimedOut}}, got, "tied deadlines fire together")

	h.clock.Advance(time.Hour)
	assert.Equal(t, []Completion{{t30, ResultTimedOut}}, h.poll())
	assert.Empty(t, h.poll())
	assert.Equal(t, 0, h.s.Stats().Timers)
	assert.True(t, h.s.Wake(forever))
}

func TestManyTimersFireSorted(t *testing.T) {
	h := newHarness(t, true)
	want := map[Token]int64{}
	// A deterministic shuffle of deadlines with plenty of ties.
	for k := 0; k < 200; k++ {
		d := time.Duration((k*7919)%50) * time.Millisecond
		tok := h.park(d)
		want[tok] = h.clock.now + int64(d)
	}
	// Cancel a few in the middle of the heap.
	cancelled := 0
	for tok := range want {
		if cancelled == 20 {
			break
		}
		require.True(t, h.s.Cancel(tok))
		delete(want, tok)
		cancelled++
	}
	h.check()
	var last int64
	fired := 0
	for step := 0; step < 60; step++ {
		for _, c := range h.poll() {
			require.Equal(t, ResultTimedOut, c.Result)
			dl, ok := want[c.Token]
			require.True(t, ok, "unknown or cancelled token %v fired", c.Token)
			require.LessOrEqual(t, dl, h.clock.now, "fired early")
			require.GreaterOrEqual(t, dl, last, "out of deadline order")
			last = dl
			delete(want, c.Token)
			fired++
		}
		h.clock.Advance(time.Millisecond)
	}
	assert.Equal(t, 180, fired)
	assert.Empty(t, want)
}

func TestBeginPollTimeout(t *testing.T) {
	h := newHarness(t, true)
	assert.Equal(t, time.Duration(-1), h.s.BeginPoll(), "nothing timed: block forever")
	h.park(-1)
	assert.Equal(t, time.Duration(-1), h.s.BeginPoll())
	h.park(50 * time.Millisecond)
	h.clock.Advance(20 * time.Millisecond)
	assert.Equal(t, 30*time.Millisecond, h.s.BeginPoll())
	h.yield()
	assert.Equal(t, time.Duration(0), h.s.BeginPoll(), "ready work: just poll")
	assert.Equal(t, uint64(4), h.s.Stats().Iterations)
}

func TestPollBlockPassesTimeout(t *testing.T) {
	h := newHarness(t, true)
	h.park(40 * time.Millisecond)
	out := make([]Completion, 4)
	_, err := h.s.Poll(out, -1, nil)
	require.NoError(t, err)
	_, err = h.s.Poll(out, 0, nil)
	require.NoError(t, err)
	assert.Equal(t, []time.Duration{40 * time.Millisecond, 0}, h.drv.timeouts)
}

func TestTimerBecomingDueDuringWaitFires(t *testing.T) {
	h := newHarness(t, true)
	tok := h.park(25 * time.Millisecond)
	h.drv.onWait = func(timeout time.Duration) { h.clock.Advance(timeout) }
	out := make([]Completion, 4)
	n, err := h.s.Poll(out, -1, nil)
	require.NoError(t, err)
	assert.Equal(t, []Completion{{tok, ResultTimedOut}}, out[:n])
}

// The core's scheduler tick reuses PolledAt instead of reading the clock
// again: it must be the reading taken after the driver's wait.
func TestPolledAtIsTheClockAfterTheWait(t *testing.T) {
	h := newHarness(t, true)
	assert.Zero(t, h.s.PolledAt())
	h.park(25 * time.Millisecond)
	h.drv.onWait = func(timeout time.Duration) { h.clock.Advance(timeout) }
	before := h.clock.Now()
	out := make([]Completion, 4)
	_, err := h.s.Poll(out, -1, nil)
	require.NoError(t, err)
	assert.Equal(t, before+int64(25*time.Millisecond), h.s.PolledAt())
}

func TestParkZeroTimeoutFiresAtNextPoll(t *testing.T) {
	h := newHarness(t, true)
	tok := h.park(0)
	assert.Equal(t, []Completion{{tok, ResultTimedOut}}, h.poll())
}

func TestParkHugeTimeoutDoesNotFire(t *testing.T) {
	h := newHarness(t, true)
	h.clock.Advance(time.Hour)
	tok := h.park(math.MaxInt64)
	assert.Empty(t, h.poll(), "an effectively infinite timeout must not overflow into the past")
	d := h.s.BeginPoll()
	assert.Greater(t, d, time.Duration(0))
	assert.True(t, h.s.Wake(tok))
}

func TestWakeBeatsTimeout(t *testing.T) {
	h := newHarness(t, true)
	tok := h.park(10 * time.Millisecond)
	require.True(t, h.s.Wake(tok))
	assert.False(t, h.s.Wake(tok), "second wake")
	assert.Equal(t, 0, h.s.Stats().Timers)
	h.clock.Advance(time.Second)
	assert.Equal(t, []Completion{{tok, ResultWoken}}, h.poll())
	assert.Empty(t, h.poll())
}

func TestTimedOutWaitCannotBeWoken(t *testing.T) {
	h := newHarness(t, true)
	tok := h.park(time.Millisecond)
	h.clock.Advance(time.Millisecond)
	h.s.BeginPoll() // fires
	assert.False(t, h.s.Wake(tok))
	h.s.EndPoll(nil)
	out := make([]Completion, 2)
	assert.Equal(t, 1, h.s.Drain(out))
	assert.Equal(t, Completion{tok, ResultTimedOut}, out[0])
}

// ---------------------------------------------------------------- cancel

func TestCancelParked(t *testing.T) {
	h := newHarness(t, true)
	tok := h.park(time.Millisecond)
	require.Equal(t, Stats{PendingWaits: 1, Timers: 1}, h.s.Stats())
	assert.True(t, h.s.Cancel(tok))
	h.check()
	assert.Equal(t, Stats{}, h.s.Stats())
	assert.False(t, h.s.Cancel(tok))
	assert.False(t, h.s.Wake(tok))
	h.clock.Advance(time.Second)
	assert.Empty(t, h.poll())
}

func TestCancelReady(t *testing.T) {
	h := newHarness(t, true)
	a := h.park(-1)
	b := h.park(-1)
	y := h.yield()
	require.True(t, h.s.Wake(a))
	require.True(t, h.s.Wake(b))
	require.Equal(t, 3, h.s.Stats().ReadyWaits)

	assert.True(t, h.s.Cancel(a), "cancel of a finished, not yet resumed wait")
	assert.True(t, h.s.Cancel(y))
	h.check()
	assert.False(t, h.s.Cancel(a), "second cancel")
	assert.False(t, h.s.Wake(a))
	st := h.s.Stats()
	assert.Equal(t, 1, st.PendingWaits, "cancelled waits are no longer pending")
	assert.Equal(t, 1, st.ReadyWaits, "cancelled waits are no longer ready")

	assert.Equal(t, []Completion{{b, ResultWoken}}, h.poll(), "a cancelled wait is never delivered")
	h.poll()
	assert.Equal(t, Stats{Iterations: 2, Completed: 1}, h.s.Stats())
	assert.Equal(t, 0, h.s.slots.inUse, "cancelled ready slots are freed")
}

func TestOnlyCancelledReadyDoesNotForceBusyPoll(t *testing.T) {
	h := newHarness(t, true)
	a := h.yield()
	require.True(t, h.s.Cancel(a))
	// Dropping the cancelled entry may need one iteration, but the loop
	// must not report work that is not there.
	assert.Equal(t, 0, h.s.Stats().ReadyWaits)
	assert.Empty(t, h.poll())
	assert.Equal(t, time.Duration(-1), h.s.BeginPoll())
}

func TestCancelDelivered(t *testing.T) {
	h := newHarness(t, true)
	tok := h.yield()
	require.Len(t, h.poll(), 1)
	assert.False(t, h.s.Cancel(tok), "a delivered wait is over")
	assert.False(t, h.s.Wake(tok))
	h.check()
	assert.Equal(t, 0, h.s.Stats().PendingWaits)
}

func TestDeliveredSlotNotReusedBeforeNextPoll(t *testing.T) {
	h := newHarness(t, true)
	a := h.yield()
	b := h.yield()
	require.Equal(t, []Token{a, b}, tokens(h.poll()))
	assert.Equal(t, 0, h.s.Stats().PendingWaits)
	assert.Equal(t, 2, h.s.slots.inUse, "delivered slots stay allocated for the extension")

	// The resumed fibers park again before the next poll: they must get new slots.
	c := h.park(-1)
	d := h.yield()
	for _, tok := range []Token{c, d} {
		assert.NotEqual(t, a.Slot(), tok.Slot())
		assert.NotEqual(t, b.Slot(), tok.Slot())
	}
	// The delivered tokens still resolve to their (delivered) slots.
	for _, tok := range []Token{a, b} {
		_, sl := h.s.slots.lookup(tok)
		require.NotNil(t, sl)
		assert.Equal(t, slotDelivered, sl.state)
	}

	assert.Equal(t, []Token{d}, tokens(h.poll()))
	for _, tok := range []Token{a, b} {
		_, sl := h.s.slots.lookup(tok)
		assert.Nil(t, sl, "freed at the next poll")
	}
	e := h.park(-1)
	assert.Contains(t, []uint32{a.Slot(), b.Slot()}, e.Slot())
	assert.NotEqual(t, a, e)
	assert.NotEqual(t, b, e)
}

func TestDrainWithoutPollAccumulatesDelivered(t *testing.T) {
	h := newHarness(t, true)
	a := h.yield()
	out := make([]Completion, 1)
	require.Equal(t, 1, h.s.Drain(out))
	b := h.yield()
	assert.NotEqual(t, a.Slot(), b.Slot())
	require.Equal(t, 1, h.s.Drain(out))
	h.check()
	assert.Len(t, h.s.delivered, 2)
	h.s.BeginPoll()
	h.check()
	assert.Equal(t, 0, h.s.slots.inUse)
}

// ---------------------------------------------------------------- stats and close

func TestStatsCounts(t *testing.T) {
	h := newHarness(t, true)
	a := h.park(time.Second)
	h.park(-1)
	h.yield()
	h.waitFD(5, R, time.Second, KnownNotReady)
	h.waitFD(6, W, -1, KnownNotReady)
	h.waitFD(6, R, -1, KnownNotReady)
	assert.Equal(t, Stats{PendingWaits: 6, ReadyWaits: 1, Timers: 2, RegisteredFDs: 2}, h.s.Stats())
	require.True(t, h.s.Wake(a))
	assert.Equal(t, Stats{PendingWaits: 6, ReadyWaits: 2, Timers: 1, RegisteredFDs: 2}, h.s.Stats())
	h.drv.Script(h.event(6, W))
	got := h.poll()
	assert.Len(t, got, 3)
	assert.Equal(t, Stats{PendingWaits: 3, ReadyWaits: 0, Timers: 1, RegisteredFDs: 2, Iterations: 1, Completed: 3}, h.s.Stats())
	require.NoError(t, h.s.ForgetFD(6))
	assert.Equal(t, Stats{PendingWaits: 3, ReadyWaits: 1, Timers: 1, RegisteredFDs: 1, Iterations: 1, Completed: 3}, h.s.Stats())
	h.poll()
	assert.Equal(t, Stats{PendingWaits: 2, ReadyWaits: 0, Timers: 1, RegisteredFDs: 1, Iterations: 2, Completed: 4}, h.s.Stats())
}

func TestClose(t *testing.T) {
	h := newHarness(t, true)
	tok := h.park(-1)
	h.drv.closeErr = errors.New("boom")
	assert.False(t, h.s.Closed())
	assert.EqualError(t, h.s.Close(), "boom")
	assert.True(t, h.s.Closed())
	assert.True(t, h.drv.closed)
	h.drv.closed = false
	assert.NoError(t, h.s.Close(), "second close is a no-op")
	assert.False(t, h.drv.closed, "driver closed only once")

	_, err := h.s.Park(-1)
	assert.ErrorIs(t, err, ErrClosed)
	_, err = h.s.Yield()
	assert.ErrorIs(t, err, ErrClosed)
	_, _, err = h.s.WaitFD(3, R, -1, KnownNothing)
	assert.ErrorIs(t, err, ErrClosed)
	assert.ErrorIs(t, h.s.ForgetFD(3), ErrClosed)
	_, err = h.s.Poll(make([]Completion, 1), -1, nil)
	assert.ErrorIs(t, err, ErrClosed)
	assert.Zero(t, h.drv.waits)
	// Tokens of dropped waits stay harmless.
	h.s.Wake(tok)
	h.s.Cancel(tok)
	h.check()
}

func TestPollEINTR(t *testing.T) {
	h := newHarness(t, true)
	y := h.yield()
	tm := h.park(time.Millisecond)
	h.drv.onWait = func(time.Duration) { h.clock.Advance(time.Millisecond) }
	h.drv.waitErr = []error{syscall.EINTR}
	out := make([]Completion, 4)
	n, err := h.s.Poll(out, -1, nil)
	assert.ErrorIs(t, err, syscall.EINTR, "EINTR is returned unchanged")
	assert.Equal(t, []Completion{{y, ResultWoken}, {tm, ResultTimedOut}}, out[:n], "ready work and due timers are still handed out")
	h.check()
}

func TestNewWithRealClock(t *testing.T) {
	s := New(newFakeDriver(true), nil)
	a := s.Now()
	time.Sleep(time.Millisecond)
	assert.Greater(t, s.Now(), a)
	assert.Equal(t, "fake-persistent", s.Driver().Name())
}
