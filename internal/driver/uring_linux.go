//go:build linux

package driver

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// URing is the io_uring readiness driver: IORING_OP_POLL_ADD per armed
// descriptor, IORING_OP_POLL_REMOVE on Disarm, and one io_uring_enter per
// Wait that both submits the queued SQEs and waits (with the timeout passed
// through IORING_ENTER_EXT_ARG). See uring_probe_linux.go for how the ring
// is set up and README.md for why it is one-shot by default.
//
// Two poll modes:
//
//   - one-shot (default, Persistent() == false): a POLL_ADD per Arm, for the
//     events asked; the request ends with its completion. A poll request
//     holds a reference to the open file, so a descriptor Ruby closes stays
//     open (a socket sends no FIN) while a poll is in flight; one-shot polls
//     are in flight only while a fiber waits (or after a wait that timed out,
//     until the next readiness or ForgetFD).
//   - multishot (IORING_POLL_ADD_MULTI, Persistent() == true): one POLL_ADD
//     per (fd, seq), edge-triggered like EPOLLET: the kernel posts a CQE per
//     wake-up of the file's wait queue, never for data that merely sits
//     unread. The request lives until Disarm, so it pins every descriptor
//     ever waited on until the scheduler forgets it; the extension forgets
//     descriptors lazily (on number reuse, or a scan every 50 ms), so this
//     mode is only selectable (FARCE_IO_URING_POLL=multishot) until the extension
//     calls ForgetFD when Ruby closes an IO.
type URing struct {
	ring   *uringRing
	info   uringInfo
	multi  bool // multishot polls: Persistent
	wakefd int  // eventfd
	wakeUD uint64

	fds      []uringFD
	nextGen  uint32
	ts       unix.Timespec     // EXT_ARG / TIMEOUT timespec (must not move: heap field)
	arg      uringGeteventsArg // EXT_ARG argument
	noExt    bool              // no IORING_FEAT_EXT_ARG: use IORING_OP_TIMEOUT SQEs
	wasted   int               // CQEs dropped as stale (tests)
	deferred bool              // Wait(0) left queued SQEs for the caller's next Wait
	noDefer  bool              // the next Wait submits what is queued (SubmitNextWait)

	opsOn    bool       // completion ops offered (uring_ops_linux.go)
	ops      []uringOp  // ops in flight, by slot
	queued   []queuedOp // ops queued since the last Wait, maybe not taken by the kernel yet
	inflight int        // live entries of ops
	done     []OpResult // reaped by the last Wait
	rebuilt  int        // rings rebuilt after a change of submitting thread (tests)

	enters atomic.Uint64 // io_uring_enter calls (KernelCalls)
	calls  atomic.Uint64 // other system calls: wake drains, registrations (KernelCalls)
}

// KernelCalls: io_uring_enter calls, and every system call the driver made
// after its ring was set up.
func (u *URing) KernelCalls() KernelCalls {
	e := u.enters.Load()
	return KernelCalls{Total: e + u.calls.Load(), Enters: e}
}

// uringFD is the driver's knowledge of one descriptor number.
type uringFD struct {
	seq    uint32
	gen    uint32 // generation of the poll request in flight; 0: none
	events Events // one-shot: events of the request in flight
	more   bool   // multishot: the request has posted a CQE with F_MORE
}

// user_data layout: kind (8 bits) | generation (24 bits) | fd (32 bits).
// The generation tells the current poll request of a descriptor from a
// removed or superseded one whose CQEs may still arrive.
const (
	udPoll    = 1
	udRemove  = 2
	udWake    = 3
	udTimeout = 4
	udNop     = 5

	genMask = 1<<24 - 1
)

func makeUD(kind uint8, gen uint32, fd int32) uint64 {
	return uint64(kind)<<56 | uint64(gen&genMask)<<32 | uint64(uint32(fd))
}

func splitUD(ud uint64) (kind uint8, gen uint32, fd int32) {
	return uint8(ud >> 56), uint32(ud>>32) & genMask, int32(uint32(ud))
}

func (u *URing) Name() string     { return "io_uring" }
func (u *URing) Persistent() bool { return u.multi }
func (u *URing) WakeFD() int      { return u.wakefd }
func (u *URing) Wake() error      { return writeWake(u.wakefd) }

func (u *URing) gen() uint32 {
	u.nextGen = (u.nextGen + 1) & genMask
	if u.nextGen == 0 {
		u.nextGen = 1
	}
	return u.nextGen
}

func (u *URing) entry(fd int) *uringFD {
	if fd >= len(u.fds) {
		n := 2 * len(u.fds)
		if n < 64 {
			n = 64
		}
		for n <= fd {
			n *= 2
		}
		nf := make([]uringFD, n)
		copy(nf, u.fds)
		u.fds = nf
	}
	return &u.fds[fd]
}

// sqe returns a free SQE, submitting the queued ones first when the SQ is
// full (the only place outside Wait that enters the kernel). That enter
// submits no op SQE: they are withdrawn first (uring_ops_linux.go).
func (u *URing) sqe() (*uringSQE, error) {
	if s := u.ring.getSQE(); s != nil {
		return s, nil
	}
	u.withdrawQueued()
	if _, err := u.enter(u.ring.publish(), 0, 0); err != nil && err != unix.EINTR && !benignEnterErr(err) {
		return nil, err
	}
	if s := u.ring.getSQE(); s != nil {
		return s, nil
	}
	return nil, fmt.Errorf("io_uring: submission queue full")
}

func pollMask(ev Events, multi bool) uint32 {
	if multi {
		return unix.POLLIN | unix.POLLOUT | unix.POLLPRI | unix.POLLRDHUP
	}
	var m uint32
	if ev&Readable != 0 {
		// RDHUP only with a read interest: a writer must not be woken
		// (and re-armed, and woken again) by the peer's shutdown.
		m |= unix.POLLIN | unix.POLLRDHUP
	}
	if ev&Priority != 0 {
		m |= unix.POLLPRI
	}
	if ev&Writable != 0 {
		m |= unix.POLLOUT
	}
	return m
}

func (u *URing) queuePoll(fd int32, gen uint32, mask uint32, multi bool, kind uint8) error {
	s, err := u.sqe()
	if err != nil {
		return err
	}
	s.Opcode = uringOpPollAdd
	s.Fd = fd
	s.OpFlags = mask // poll32_events, little-endian halves on big-endian hosts below
	if nativeBigEndian {
		s.OpFlags = mask<<16 | mask>>16
	}
	if multi {
		s.Len = uringPollAddMulti
	}
	s.UserData = makeUD(kind, gen, fd)
	return nil
}

func (u *URing) queueRemove(target uint64) error {
	s, err := u.sqe()
	if err != nil {
		return err
	}
	s.Opcode = uringOpPollRemove
	s.Fd = -1
	s.Addr = target
	s.UserData = makeUD(udRemove, 0, 0)
	return nil
}

func (u *URing) Arm(fd int, seq uint32, events Events) error {
	if fd < 0 || fd >= MaxFD {
		return fmt.Errorf("io_uring: invalid descriptor %d", fd)
	}
	e := u.entry(fd)
	if u.multi {
		if e.gen != 0 {
			if e.seq == seq {
				return nil
			}
			// New owner of the same open file: keep the request, echo the
			// new seq from now on.
			e.seq = seq
			return nil
		}
		g := u.gen()
		if err := u.queuePoll(int32(fd), g, pollMask(0, true), true, udPoll); err != nil {
			return err
		}
		*e = uringFD{seq: seq, gen: g}
		return nil
	}
	events &= RubyMask
	if events == 0 {
		events = RubyMask
	}
	if e.gen != 0 {
		e.seq = seq
		if e.events&events == events {
			return nil // a request for these events is already in flight
		}
		// Widen: replace the request by one for the union.
		events |= e.events
		if err := u.queueRemove(makeUD(udPoll, e.gen, int32(fd))); err != nil {
			return err
		}
		e.gen = 0
	}
	g := u.gen()
	if err := u.queuePoll(int32(fd), g, pollMask(events, false), false, udPoll); err != nil {
		return err
	}
	*e = uringFD{seq: seq, gen: g, events: events}
	return nil
}

func (u *URing) Disarm(fd int) error {
	if fd < 0 || fd >= len(u.fds) {
		return nil
	}
	e := &u.fds[fd]
	if e.gen == 0 {
		return nil
	}
	err := u.queueRemove(makeUD(udPoll, e.gen, int32(fd)))
	*e = uringFD{}
	return err
}

// enter calls io_uring_enter; a change of submitting thread under
// IORING_SETUP_SINGLE_ISSUER (EEXIST) rebuilds the ring on this thread.
func (u *URing) enter(toSubmit, minComplete, flags uint32) (int, error) {
	var arg unsafe.Pointer
	var argSize uintptr
	if flags&uringEnterExtArg != 0 {
		arg, argSize = unsafe.Pointer(&u.arg), unsafe.Sizeof(u.arg)
	}
	u.deferred = false
	u.enters.Add(1)
	n, err := uringEnter(u.ring.fd, toSubmit, minComplete, flags, arg, argSize)
	if err == unix.EEXIST && u.info.setup&uringSetupSingleIssuer != 0 {
		if rerr := u.rebuild(); rerr != nil {
			return 0, rerr
		}
		return 0, nil // the caller reaps what the new ring has; a spurious return at worst
	}
	return n, err
}

// Wait reaps what the completion queue holds; it enters the kernel (once)
// only to submit queued SQEs, to run deferred completion work the kernel
// flagged, to flush an overflowed CQ, or to block. It is the only enter
// that submits op SQEs, and an op it did not get the kernel to take is
// withdrawn before it returns (uring_ops_linux.go).
func (u *URing) Wait(buf []Event, timeout time.Duration) (int, error) {
	n, err := u.wait(buf, timeout)
	if len(u.queued) > 0 {
		u.withdrawQueued()
	}
	return n, err
}

// SubmitNextWait implements Deferrer.
func (u *URing) SubmitNextWait(now bool) { u.noDefer = now }

func (u *URing) wait(buf []Event, timeout time.Duration) (int, error) {
	noDefer := u.noDefer
	u.noDefer = false
	if len(buf) == 0 {
		return 0, nil
	}
	n, woke := u.reap(buf)
	woke = woke || len(u.done) > 0 // withdrawn ops: results to hand out
	pending := u.ring.publish()
	flags := u.ring.flags()
	kernelWork := flags&(uringSQCQOverflow|uringSQTaskrun) != 0 || !u.info.cheapPeek
	if n > 0 || woke || timeout == 0 {
		if pending == 0 && !kernelWork {
			return n, nil
		}
		if timeout == 0 && n == 0 && !woke && !kernelWork && !u.deferred && !noDefer && len(u.queued) == 0 {
			// Nothing to report and only submissions queued: the caller
			// (the extension's loop) blocks next, and that Wait submits them in
			// the same io_uring_enter. Never twice in a row, so a busy
			// loop that never blocks still submits every other Wait. Never
			// op SQEs: the blocking Wait runs with Ruby's lock released,
			// when other threads may close an op's IO and reuse its number
			// before the kernel takes the SQE.
			u.deferred = true
			return 0, nil
		}
		if n == len(buf) && pending == 0 {
			return n, nil // the rest waits in the CQ for the next Wait
		}
		if _, err := u.enter(pending, 0, uringEnterGetEvents); err != nil && !benignEnterErr(err) {
			if n > 0 {
				return n, nil
			}
			return 0, err
		}
		m, _ := u.reap(buf[n:])
		return n + m + u.runLocalWork(buf[n+m:]), nil
	}
	enterFlags := uint32(uringEnterGetEvents)
	if timeout > 0 {
		u.ts = unix.NsecToTimespec(int64(timeout))
		if u.noExt {
			if err := u.queueTimeout(); err != nil {
				return 0, err
			}
			pending = u.ring.publish()
		} else {
			u.arg = uringGeteventsArg{Ts: uint64(uintptr(unsafe.Pointer(&u.ts)))}
			enterFlags |= uringEnterExtArg
		}
	}
	_, err := u.enter(pending, 1, enterFlags)
	if err != nil && err != unix.ETIME && !benignEnterErr(err) {
		return 0, err // EINTR included: the caller decides
	}
	m, _ := u.reap(buf)
	return m + u.runLocalWork(buf[m:]), nil
}

// runLocalWork enters again while the kernel still flags deferred
// completion work (DEFER_TASKRUN rings): since Linux 6.11 an enter that asks
// for no completion runs only a few of them (IO_LOCAL_TW_DEFAULT_MAX, 20)
// and leaves the rest for the next enter, which a busy loop makes only
// after it ran a whole batch of fibers. Under 1,000 connections that left
// readable sockets unreported for several iterations (the slowest HTTP
// requests took 100+ ms, against 30 ms on epoll). Bounded, and it stops
// once buf is full: the rest waits in the CQ for the next Wait.
func (u *URing) runLocalWork(buf []Event) int {
	n := 0
	for i := 0; i < 64 && n < len(buf) && u.ring.flags()&uringSQTaskrun != 0; i++ {
		if _, err := u.enter(0, 0, uringEnterGetEvents); err != nil && !benignEnterErr(err) {
			break
		}
		m, _ := u.reap(buf[n:])
		n += m
	}
	return n
}

// benignEnterErr: results of io_uring_enter after which reaping is right.
// EBUSY/EAGAIN: the kernel could not take more work until the CQ drains;
// EBADR: completions were dropped (never with FEAT_NODROP).
func benignEnterErr(err error) bool {
	return err == unix.EBUSY || err == unix.EAGAIN || err == unix.EBADR
}

// queueTimeout is the pre-5.11 way to bound a wait: a TIMEOUT SQE that
// also completes after one other completion (count 1), so it never lingers.
func (u *URing) queueTimeout() error {
	s, err := u.sqe()
	if err != nil {
		return err
	}
	s.Opcode = uringOpTimeout
	s.Fd = -1
	s.Addr = uint64(uintptr(unsafe.Pointer(&u.ts)))
	s.Len = 1
	s.Off = 1
	s.UserData = makeUD(udTimeout, 0, 0)
	return nil
}

// reap moves CQEs into buf until it is full; woke reports a wakeup CQE.
func (u *URing) reap(buf []Event) (n int, woke bool) {
	r := u.ring
	head := atomic.LoadUint32(r.cqHead)
	tail := atomic.LoadUint32(r.cqTail)
	for head != tail && n < len(buf) {
		c := r.cqes[head&r.cqMask]
		head++
		kind, gen, fd := splitUD(c.UserData)
		switch kind {
		case udPoll:
			if ev, ok := u.pollCQE(fd, gen, c); ok {
				buf[n] = ev
				n++
			}
		case udOp:
			if u.opCQE(c) {
				woke = true // a result to hand out: do not block
			}
		case udWake:
			woke = true
			u.drainWake()
			if c.Flags&uringCQEFMore == 0 {
				u.armWake()
			}
		default: // removals, timeouts, nops
		}
	}
	atomic.StoreUint32(r.cqHead, head)
	return n, woke
}

// pollCQE turns a poll completion into an Event, dropping stale ones.
func (u *URing) pollCQE(fd int32, gen uint32, c uringCQE) (Event, bool) {
	if fd < 0 || int(fd) >= len(u.fds) || u.fds[fd].gen != gen || gen == 0 {
		u.wasted++
		return Event{}, false // a removed or superseded request
	}
	e := &u.fds[fd]
	more := c.Flags&uringCQEFMore != 0
	var ev Events
	if c.Res < 0 {
		if c.Res == -int32(unix.ECANCELED) && u.multi && e.more {
			// A multishot poll the kernel ended (e.g. CQ overflow): re-arm.
			u.rearmMulti(fd, e)
			return Event{}, false
		}
		// EBADF and friends: let the waiter retry and meet the error.
		ev = Readable | Writable | Hangup
		*e = uringFD{seq: e.seq}
	} else {
		ev = epollToEvents(uint32(c.Res))
		if !u.multi {
			*e = uringFD{seq: e.seq} // one-shot: the request is over
		} else if more {
			e.more = true
		} else if e.more && ev&Hangup == 0 {
			u.rearmMulti(fd, e) // ended by the kernel: keep the edge stream going
		} else {
			// Ended at its first report (a file without a wait queue:
			// always ready) or on a hang-up: no edge will ever follow, so
			// report the descriptor as finished for every waiter.
			ev |= Readable | Writable | Hangup
			*e = uringFD{seq: e.seq}
		}
	}
	return Event{FD: fd, Seq: e.seq, Events: ev}, true
}

func (u *URing) rearmMulti(fd int32, e *uringFD) {
	g := u.gen()
	if u.queuePoll(fd, g, pollMask(0, true), true, udPoll) != nil {
		*e = uringFD{seq: e.seq}
		return
	}
	e.gen, e.more = g, false
}

func (u *URing) armWake() error {
	return u.queuePoll(int32(u.wakefd), 0, unix.POLLIN, u.info.multishot, udWake)
}

func (u *URing) drainWake() {
	var b [8]byte
	u.calls.Add(1)
	unix.Read(u.wakefd, b[:])
}

// rebuild replaces the ring by a new one created on the calling thread and
// re-queues every request in flight: needed when IORING_SETUP_SINGLE_ISSUER
// rings are entered from a thread other than their creator's (a scheduler
// created on one Ruby thread and run on another; Go tests). Requests re-armed
// report current readiness at once, which at worst is a spurious event.
func (u *URing) rebuild() error {
	// Ops that completed in the old ring keep their results. One the old
	// ring's kernel side has taken and not completed belongs to that ring:
	// only its creator thread can reap it, so no rebuild (ErrForeignThread).
	// The others (never submitted) are withdrawn with -EAGAIN.
	u.reapOps()
	if u.opsSubmittedTo(u.ring) {
		return ErrForeignThread
	}
	u.withdrawForRebuild()
	ring, info, err := newRing(u.info.want)
	if err != nil {
		return err
	}
	u.ring.close()
	info.ops = u.info.ops
	u.ring, u.info = ring, info
	u.rebuilt++
	if err := u.armWake(); err != nil {
		return err
	}
	for fd := range u.fds {
		e := &u.fds[fd]
		if e.gen == 0 {
			continue
		}
		e.gen, e.more = u.gen(), false
		if err := u.queuePoll(int32(fd), e.gen, pollMask(e.events, u.multi), u.multi, udPoll); err != nil {
			return err
		}
	}
	// A pending wakeup whose CQE died with the old ring must not be lost.
	return u.Wake()
}

func (u *URing) Close() error {
	var err error
	if u.ring != nil {
		u.drainOps()
		err = u.ring.close()
		u.ring = nil
	}
	if u.wakefd >= 0 {
		if e := unix.Close(u.wakefd); err == nil {
			err = e
		}
		u.wakefd = -1
	}
	return err
}

var nativeBigEndian = binary.NativeEndian.Uint16([]byte{0, 1}) == 1
