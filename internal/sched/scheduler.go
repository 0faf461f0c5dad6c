package sched

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/farce-rb/farce/internal/driver"
)

// Clock returns monotonic nanoseconds. Tests and fuzzers inject their own.
type Clock func() int64

// Scheduler is the core of one farce event loop.
type Scheduler struct {
	drv    driver.Driver
	comp   driver.Completer // drv, when it performs operations (SupportsOps)
	clock  Clock
	slots  slotTable
	timers timerHeap
	ready  readyRing
	fds    fdTable

	delivered []uint32 // slots handed out by the last Drain, freed at the next poll
	behind    []Token  // YieldLast waits, finished at the end of the next poll (turns.go)
	wakeups   LatencyHistogram
	unstamped []uint32 // finished since the last poll, readiness time not yet stamped (latency.go)
	latency   bool     // wakeups is kept (RecordWakeups); off: no stamp, no record
	cancelled int      // slots cancelled while in the ready ring, dropped by Drain
	reserved  int      // slots handed out by Reserve and not bound or cancelled yet (reserve.go)
	events    []driver.Event
	closed    bool

	iterations uint64
	completed  uint64
	polledAt   int64 // the clock when the last EndPoll ran

	// drv, when its Wait(0) may leave submissions for the next Wait: told
	// not to when a Poll hands out work anyway (see Poll)
	deferrer driver.Deferrer
}

// ErrClosed is returned by every call after Close.
var ErrClosed = errors.New("scheduler is closed")

// New creates a scheduler that owns drv. A nil clock means the process's
// monotonic clock.
func New(drv driver.Driver, clock Clock) *Scheduler {
	if clock == nil {
		start := time.Now()
		clock = func() int64 { return int64(time.Since(start)) }
	}
	s := &Scheduler{drv: drv, clock: clock, events: make([]driver.Event, 256)}
	s.timers.slots = &s.slots
	if c, ok := drv.(driver.Completer); ok && c.SupportsOps() {
		s.comp = c
	}
	s.deferrer, _ = drv.(driver.Deferrer)
	return s
}

// Driver returns the scheduler's driver.
func (s *Scheduler) Driver() driver.Driver { return s.drv }

// Now is the scheduler's clock.
func (s *Scheduler) Now() int64 { return s.clock() }

// park allocates a parked slot with an optional timeout (negative: none).
func (s *Scheduler) park(timeout time.Duration) (uint32, *slot) {
	i, sl := s.slots.alloc()
	if timeout >= 0 {
		now := s.clock()
		sl.deadline = now + int64(timeout)
		if sl.deadline < now { // overflow: a practically infinite timeout
			sl.deadline = math.MaxInt64
		}
		s.timers.push(i)
	}
	return i, sl
}

// Park starts a wait that ends with Wake (ResultWoken) or, when timeout is
// not negative, when it expires (ResultTimedOut). Sleeps, Ruby's block hook
// and timeout_after alarms are all parks.
func (s *Scheduler) Park(timeout time.Duration) (Token, error) {
	if s.closed {
		return 0, ErrClosed
	}
	i, sl := s.park(timeout)
	return makeToken(i, sl.gen), nil
}

// Yield starts a wait that is already finished: the caller runs again after
// every wait that finished before it (and after the next I/O poll).
func (s *Scheduler) Yield() (Token, error) {
	if s.closed {
		return 0, ErrClosed
	}
	i, sl := s.slots.alloc()
	s.finish(i, ResultWoken)
	return makeToken(i, sl.gen), nil
}

// Wake finishes a Park with ResultWoken. It reports false for tokens whose
// wait already finished, was cancelled or never existed: such wakeups are
// harmless by design.
func (s *Scheduler) Wake(tok Token) bool {
	i, sl := s.slots.lookup(tok)
	if sl == nil || sl.state != slotParked || sl.fd >= 0 {
		return false
	}
	s.finish(i, ResultWoken)
	return true
}

// Cancel abandons a wait whose fiber was resumed some other way (an
// exception). It reports whether the wait was still pending.
func (s *Scheduler) Cancel(tok Token) bool {
	i, sl := s.slots.lookup(tok)
	if sl == nil {
		return false
	}
	switch sl.state {
	case slotParked:
		if sl.reserved {
			sl.reserved = false
			s.reserved--
		}
		if sl.op {
			// The kernel still owns the operation's memory and will post a
			// completion naming this slot: keep the slot until then.
			if !sl.cancelling {
				s.comp.CancelOp(opID(i, sl.gen))
				sl.cancelling = true
			}
			sl.orphan = true
			return true
		}
		s.unlink(i, sl)
		s.slots.release(i)
		return true
	case slotReady:
		sl.state = slotCancelled
		s.cancelled++
		return true
	}
	return false
}

// unlink removes a parked slot from the timer heap and its waiter list.
func (s *Scheduler) unlink(i uint32, sl *slot) {
	if sl.heapIdx >= 0 {
		s.timers.remove(i)
	}
	if sl.fd >= 0 {
		st := &s.fds.fds[sl.fd]
		if sl.prev >= 0 {
			s.slots.slots[sl.prev].next = sl.next
		} else {
			st.head = sl.next
		}
		if sl.next >= 0 {
			s.slots.slots[sl.next].prev = sl.prev
		} else {
			st.tail = sl.prev
		}
		st.waiters--
		sl.fd, sl.prev, sl.next = -1, -1, -1
	}
}

// finish moves a slot to the ready queue with result.
func (s *Scheduler) finish(i uint32, result int64) {
	sl := &s.slots.slots[i]
	if sl.state == slotParked {
		s.unlink(i, sl)
	}
	if sl.reserved { // a reserved park woken before the poll that binds it
		sl.reserved = false
		s.reserved--
	}
	sl.state = slotReady
	sl.result = result
	sl.readyAt = 0 // stamped by the poll that hands it out (stampReady), or a timer's deadline
	if s.latency {
		s.unstamped = append(s.unstamped, i)
	}
	s.ready.push(i)
}

// ValidateFD reports a descriptor number that cannot be a real one.
func ValidateFD(fd int) error {
	if fd < 0 || fd >= maxFD {
		return fmt.Errorf("invalid file descriptor %d", fd)
	}
	return nil
}

// probeNow asks the kernel whether fd is ready for events now. done: the
// wait ends at once, with got (the ready events, or what a hang-up gives)
// or err; a direction found ready is no longer known empty.
func probeNow(fd int, st *fdState, events Events) (got Events, done bool, err error) {
	got, hungUp, err := ProbeFD(fd, events)
	if err != nil {
		return 0, true, err
	}
	if hungUp {
		return got, true, nil
	}
	if got != 0 {
		st.notReady &^= got
		return got, true, nil
	}
	return 0, false, nil
}

// WaitFD waits until fd is ready for one of events. When the answer is
// known at once it returns a zero Token and the ready events; otherwise it
// parks and the completion carries the events (or ResultTimedOut or
// ResultClosed).
func (s *Scheduler) WaitFD(fd int, events Events, timeout time.Duration, known Readiness) (Token, Events, error) {
	if s.closed {
		return 0, 0, ErrClosed
	}
	if timeout == 0 && known == KnownNothing {
		known = askKernel // IO#wait_readable(0): is there anything now?
	}
	ready, err := s.prepareFD(fd, events, known)
	if err != nil || ready != 0 {
		return 0, ready, err
	}
	i, sl := s.park(timeout)
	s.linkFD(i, sl, fd, events&driver.RubyMask)
	return makeToken(i, sl.gen), 0, nil
}

// prepareFD is the part of a descriptor wait before it parks: the events fd
// is known to be ready for (non-zero: no wait is needed), or 0 once the
// driver is armed to report them.
func (s *Scheduler) prepareFD(fd int, events Events, known Readiness) (Events, error) {
	if err := ValidateFD(fd); err != nil {
		return 0, err
	}
	events &= driver.RubyMask
	if events == 0 {
		return 0, fmt.Errorf("fd %d: no events to wait for", fd)
	}
	st := s.fds.get(fd)
	if st.pollable == pollNo {
		return events, nil
	}
	if st.hangup {
		// A hang-up or error report is a hint, not a state: a socket error
		// (ICMP unreachable on connected UDP) is consumed by the read that
		// surfaces it, and the descriptor waits normally again. Ask the
		// kernel instead of answering "ready" forever, which would spin
		// the waiter.
		got, err := driver.Probe(fd, events)
		if err != nil || got != 0 {
			return events, nil // still hung up, or ready: the follow-up call tells
		}
		s.clearHangup(st)
	}
	if st.readEOF && events&driver.Readable != 0 {
		return driver.Readable, nil
	}
	switch known {
	case KnownNotReady:
		st.ready &^= events
		st.notReady |= events
	case KnownDrained, KnownNothing:
		if got := st.ready & events; got != 0 {
			st.ready &^= got
			return got, nil
		}
		if known == KnownNothing && st.notReady&events != events {
			if got, done, err := probeNow(fd, st, events); done {
				return got, err
			}
		}
		st.notReady |= events
	case askKernel:
		// "The edge will come" (KnownNothing's trust in notReady) holds for
		// a wait that parks until it does, not for one that ends now: after
		// a zero-timeout wait found the descriptor empty, the bytes written
		// next went unseen by every zero-timeout wait until the loop polled
		// (IO#wait_readable(0) answered nil while IO.select said ready). An
		// edge seen may be stale the other way (its bytes read since). The
		// kernel answers; found empty, it tells what a failed read would.
		if got, done, err := probeNow(fd, st, events); done {
			return got, err
		}
		st.ready &^= events
		st.notReady |= events
	default:
		return 0, fmt.Errorf("invalid readiness %d", known)
	}
	if err := s.arm(fd, st, events); err != nil {
		if errors.Is(err, driver.ErrNotPollable) {
			st.pollable = pollNo
			return events, nil
		}
		return 0, err
	}
	return 0, nil
}

// linkFD puts parked slot i at the end of fd's waiter list.
func (s *Scheduler) linkFD(i uint32, sl *slot, fd int, events Events) {
	st := &s.fds.fds[fd]
	sl.fd = int32(fd)
	sl.interest = events
	sl.prev = st.tail
	if st.tail >= 0 {
		s.slots.slots[st.tail].next = int32(i)
	} else {
		st.head = int32(i)
	}
	st.tail = int32(i)
	st.waiters++
}

// arm makes sure the driver will report events on fd.
func (s *Scheduler) arm(fd int, st *fdState, events Events) error {
	if s.drv.Persistent() {
		if st.registered {
			return nil
		}
		if err := s.drv.Arm(fd, st.seq, driver.RubyMask); err != nil {
			return err
		}
		st.registered = true
		st.pollable = pollYes
		s.fds.registered++
		return nil
	}
	if st.armed&events == events {
		return nil
	}
	if err := s.drv.Arm(fd, st.seq, st.armed|events); err != nil {
		return err
	}
	if st.armed == 0 {
		s.fds.registered++
	}
	st.armed |= events
	st.pollable = pollYes
	return nil
}

// clearHangup forgets a hang-up the kernel no longer reports. A persistent
// registration is made again: some drivers (io_uring multishot) end their
// request on a hang-up, and for the others re-arming is one cheap call.
func (s *Scheduler) clearHangup(st *fdState) {
	st.hangup = false
	if s.drv.Persistent() && st.registered {
		st.registered = false
		s.fds.registered--
	}
}

// ForgetFD is called when the descriptor number fd was closed or is about to
// be used by a new IO object: waiters finish with ResultClosed, the
// registration is dropped and later events for the old owner are ignored.
func (s *Scheduler) ForgetFD(fd int) error {
	if s.closed {
		return ErrClosed
	}
	st := s.fds.lookup(fd)
	if st == nil {
		return ValidateFD(fd)
	}
	s.forget(fd, st)
	return nil
}

// forget is ForgetFD on a descriptor the table has.
func (s *Scheduler) forget(fd int, st *fdState) {
	for st.head >= 0 {
		s.finish(uint32(st.head), ResultClosed)
	}
	ops := st.ops
	if ops > 0 {
		s.cancelOpsOn(fd)
	}
	if st.registered || st.armed != 0 {
		s.fds.registered--
	}
	s.drv.Disarm(fd)
	seq := st.seq + 1
	if seq == ^uint32(0) { // reserved by drivers for their own wakeup
		seq = 1
	}
	*st = fdState{seq: seq, head: -1, tail: -1, ops: ops}
}

// FileID names the open file a descriptor number refers to, as far as the
// caller can tell without holding the file (the extension uses st_dev,
// st_ino and the access mode). The zero FileID means "not known".
type FileID struct{ Dev, Ino uint64 }

// SetFDFile tells the scheduler which open file fd names now. The caller asks
// only when it has reason to (another IO object presents the number), so
// the common wait costs nothing here. When fd was bound to another file,
// the number changed hands behind the caller's back (a close(2) or dup2(2)
// by C code): everything known of the old file goes as in ForgetFD (its
// waiters finish with ResultClosed, its registration is dropped, its late
// events are ignored) and the next wait arms the new file afresh. It
// reports whether that happened. A descriptor not bound yet (or forgotten
// since) just takes the identity.
func (s *Scheduler) SetFDFile(fd int, file FileID) (changed bool, err error) {
	if s.closed {
		return false, ErrClosed
	}
	if err := ValidateFD(fd); err != nil {
		return false, err
	}
	st := s.fds.get(fd)
	if st.file == file {
		return false, nil
	}
	if st.file != (FileID{}) {
		s.forget(fd, st)
		changed = true
	}
	st.file = file
	return changed, nil
}

// deliver applies one driver event.
func (s *Scheduler) deliver(ev driver.Event) {
	st := s.fds.lookup(int(ev.FD))
	if st == nil || st.seq != ev.Seq {
		return // stale: the number changed hands since it was armed
	}
	if !s.drv.Persistent() && st.armed != 0 {
		st.armed = 0 // one-shot: the driver forgot this arm
		s.fds.registered--
	}
	if ev.Events&driver.Hangup != 0 {
		st.hangup = true
	}
	if ev.Events&driver.ReadHangup != 0 {
		st.readEOF = true
	}
	got := ev.Events & driver.RubyMask
	st.notReady &^= got
	var handed Events
	var rearm Events
	for i := st.head; i >= 0; {
		sl := &s.slots.slots[i]
		next := sl.next
		m := got & sl.interest
		if st.hangup {
			// Every later wait finishes at once; so does every current one,
			// even for an event the hang-up does not name (no edge follows).
			m = sl.interest
		} else if st.readEOF {
			m |= sl.interest & driver.Readable
		}
		if m != 0 {
			handed |= m
			s.finish(uint32(i), int64(m))
		} else {
			rearm |= sl.interest
		}
		i = next
	}
	st.ready |= got &^ handed
	if rearm != 0 && !s.drv.Persistent() {
		s.arm(int(ev.FD), st, rearm)
	}
}

// fireTimers finishes every wait whose deadline has passed.
func (s *Scheduler) fireTimers(now int64) {
	for {
		i, ok := s.timers.peek()
		if !ok || s.slots.slots[i].deadline > now {
			return
		}
		s.finish(i, ResultTimedOut)
		s.slots.slots[i].readyAt = s.slots.slots[i].deadline // due then, however late the poll
	}
}

// BeginPoll starts a loop iteration: it frees the slots of the previous
// batch, fires due timers and returns how long the driver may block (zero
// when work is ready, negative when nothing is timed).
func (s *Scheduler) BeginPoll() time.Duration {
	s.beginPoll()
	now := s.clock()
	s.polledAt = now
	if len(s.unstamped) > 0 {
		s.stampReady(now)
	}
	s.fireTimers(now)
	return s.blockFor(now)
}

// beginPoll is the part of BeginPoll that needs no clock.
func (s *Scheduler) beginPoll() {
	for _, i := range s.delivered {
		s.slots.release(i)
	}
	s.delivered = s.delivered[:0]
	s.iterations++
}

// blockFor is how long the driver may block at now: zero when work is
// ready, negative when nothing is timed.
func (s *Scheduler) blockFor(now int64) time.Duration {
	if s.ready.len() > s.cancelled || len(s.behind) > 0 {
		return 0
	}
	i, ok := s.timers.peek()
	if !ok {
		return -1
	}
	return time.Duration(s.slots.slots[i].deadline - now)
}

// EndPoll applies the events the driver returned, the operations it
// completed, and fires timers that became due while it blocked.
func (s *Scheduler) EndPoll(events []driver.Event) {
	s.endPoll(events, s.clock())
}

// endPoll is EndPoll at now.
func (s *Scheduler) endPoll(events []driver.Event, now int64) {
	for _, ev := range events {
		s.deliver(ev)
	}
	if s.comp != nil {
		for _, r := range s.comp.Completions() {
			s.deliverOp(r)
		}
	}
	s.fireTimers(now)
	s.finishBehind()
	if len(s.unstamped) > 0 { // wake-up latency kept (RecordWakeups)
		s.stampReady(now)
	}
	s.polledAt = now
}

// PolledAt is the clock's reading at the end of the last poll (0 before
// the first): callers that need the time right after a poll read it here.
func (s *Scheduler) PolledAt() int64 { return s.polledAt }

// Drain moves up to len(out) finished waits into out, oldest first. The
// batch size is the fairness budget: the loop polls for I/O again before it
// runs more, so fibers that keep yielding cannot starve descriptors.
func (s *Scheduler) Drain(out []Completion) int {
	n := 0
	for n < len(out) {
		i, ok := s.ready.pop()
		if !ok {
			break
		}
		sl := &s.slots.slots[i]
		if sl.state == slotCancelled {
			s.slots.release(i)
			s.cancelled--
			continue
		}
		sl.state = slotDelivered
		s.delivered = append(s.delivered, i)
		out[n] = Completion{Token: makeToken(i, sl.gen), Result: sl.result}
		n++
	}
	s.completed += uint64(n)
	return n
}

// ProbeFD asks the kernel, without blocking and without any cached
// knowledge, which of events (Ruby's bits) fd is ready for. A hang-up or an
// error makes it ready for all of them (and hungUp true): the caller's next
// call reports the cause. WaitFD uses it for a descriptor it knows nothing
// about, IO.select's instant check (farce_probe) for every descriptor.
func ProbeFD(fd int, events Events) (ready Events, hungUp bool, err error) {
	if err := ValidateFD(fd); err != nil {
		return 0, false, err
	}
	events &= driver.RubyMask
	got, err := driver.Probe(fd, events)
	if err != nil {
		return 0, false, fmt.Errorf("fd %d: %w", fd, err)
	}
	if got&driver.Hangup != 0 {
		return events, true, nil
	}
	return got & events, false, nil
}

// Poll runs one whole iteration (arm waits, ask the driver, apply what it
// returned, fire timers) and moves up to len(out) finished waits into out.
// It is the only poll path: farce_poll (ext/farce/core/export.go) and the
// tests both call it. limit bounds how long the driver may block: 0 never
// blocks, a negative limit leaves the bound to the next timer. When the
// driver is to block and release is not nil, release is unlocked for the
// wait (so other threads can read stats or wake waits) and locked again
// before the results are applied. An error from the driver (EINTR
// included) comes back unchanged, with what was already finished (ready
// work, due timers) drained all the same.
func (s *Scheduler) Poll(out []Completion, limit time.Duration, release sync.Locker) (int, error) {
	if s.closed {
		return 0, ErrClosed
	}
	if limit == 0 && s.deferrer == nil {
		// The driver will not block: one clock reading, after it, does
		// for the whole iteration (a ping-pong polls twice per round
		// trip, and each reading is a vDSO call). Timers due by then fire
		// first, ahead of the events, as BeginPoll would have queued them.
		// Not for a driver that defers submissions (io_uring): whether to
		// submit now depends on the ready work, due timers included,
		// before its Wait (below).
		s.beginPoll()
		n, err := s.drv.Wait(s.events, 0)
		now := s.clock()
		s.fireTimers(now)
		if err != nil {
			n = 0
		}
		s.endPoll(s.events[:n], now)
		return s.Drain(out), err
	}
	timeout := s.BeginPoll()
	if timeout == 0 && s.deferrer != nil && s.ready.len() > s.cancelled {
		// This poll hands out ready work (yields, wakes, due timers): its
		// caller runs it before it polls again, so the driver's bet that
		// an empty Wait(0) is followed by a blocking one would leave waits
		// armed since the last poll unsubmitted for a whole iteration.
		s.deferrer.SubmitNextWait(true)
	}
	if limit >= 0 && (timeout < 0 || timeout > limit) {
		timeout = limit
	}
	var n int
	var err error
	if timeout != 0 && release != nil {
		release.Unlock()
		n, err = s.drv.Wait(s.events, timeout)
		release.Lock()
	} else {
		n, err = s.drv.Wait(s.events, timeout)
	}
	if err != nil {
		n = 0
	}
	s.EndPoll(s.events[:n])
	return s.Drain(out), err
}

// Stats is a snapshot of the scheduler's counters.
type Stats struct {
	PendingWaits  int    // parked or finished but not yet resumed
	ReadyWaits    int    // finished, waiting for the loop to resume them
	Timers        int    // waits with a deadline
	RegisteredFDs int    // descriptors the driver watches (or has operations in flight on)
	Iterations    uint64 // loop iterations (polls)
	Completed     uint64 // waits handed back to the extension
	KernelCalls   uint64 // system calls the driver made (0 when it does not count them)
	URingEnters   uint64 // of which io_uring_enter
}

func (s *Scheduler) Stats() Stats {
	var kc driver.KernelCalls
	if c, ok := s.drv.(driver.Counter); ok {
		kc = c.KernelCalls()
	}
	return Stats{
		KernelCalls:   kc.Total,
		URingEnters:   kc.Enters,
		PendingWaits:  s.slots.inUse - len(s.delivered) - s.cancelled - s.reserved,
		ReadyWaits:    s.ready.len() - s.cancelled,
		Timers:        s.timers.len(),
		RegisteredFDs: s.fds.registered + s.fds.opFDs,
		Iterations:    s.iterations,
		Completed:     s.completed,
	}
}

// Close releases the driver. Pending waits are dropped: the extension resumes or
// abandons their fibers itself.
func (s *Scheduler) Close() error {
	if s.closed {
		return nil
	}
	// The driver cancels and reaps operations still in flight before it
	// releases the ring (driver.Completer).
	s.closed = true
	return s.drv.Close()
}

// Closed reports whether Close was called.
func (s *Scheduler) Closed() bool { return s.closed }
