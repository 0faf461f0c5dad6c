//go:build linux

package driver

import (
	"fmt"
	"os"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Completion operations on io_uring (the Completer interface):
// IORING_OP_READ/WRITE with the caller's memory, IORING_OP_ASYNC_CANCEL to
// cancel. An op's user_data is udOp<<56 | ID (56 bits); the table below,
// indexed by the ID's low 32 bits (the scheduler's slot index, dense),
// remembers every op until its CQE has been reaped, so that a ring rebuilt
// on another thread re-queues them and Close can wait for them: the memory
// an op names is the caller's until its OpResult is returned.

// uringOpsByDefault: whether a ring offers completion ops unless
// FARCE_IO_URING_OPS says otherwise.
var uringOpsByDefault = true

const (
	udOp     = 6
	udCancel = 7
)

type uringOp struct {
	op        Op
	live      bool
	cancelled bool // CancelOp was called: a rebuilt ring cancels it again
	// Where its SQE went: the ring and the SQ position. Once the kernel's
	// SQ head has passed that position the kernel owns the operation, and
	// only that ring will ever report its completion (see submitted).
	ring  *uringRing
	sqPos uint32
}

// submitted reports whether the kernel has taken the op's SQE from ring r.
func (e *uringOp) submitted(r *uringRing) bool {
	return e.ring == r && int32(e.sqPos-atomic.LoadUint32(r.sqHead)) < 0
}

// ErrForeignThread wraps EEXIST when a SINGLE_ISSUER ring is entered from a
// thread that did not create it while operations the creator submitted
// are still in flight: their completions can only be reaped by that
// thread, so the ring cannot be rebuilt here (a rebuild would start them a
// second time while the old ring may still complete them: two reads into
// one buffer, bytes lost).
var ErrForeignThread = fmt.Errorf("%w: io_uring operations in flight belong to the thread that runs this scheduler; use a scheduler only from that thread", unix.EEXIST)

func (u *URing) SupportsOps() bool { return u.opsOn }

func (u *URing) OpsInFlight() int { return u.inflight }

func (u *URing) Completions() []OpResult {
	d := u.done
	u.done = u.done[:0]
	return d
}

func (u *URing) opEntry(idx uint32) *uringOp {
	if int(idx) >= len(u.ops) {
		n := 2 * len(u.ops)
		if n < 64 {
			n = 64
		}
		for n <= int(idx) {
			n *= 2
		}
		no := make([]uringOp, n)
		copy(no, u.ops)
		u.ops = no
	}
	return &u.ops[idx]
}

func (u *URing) SubmitOp(op Op) error {
	if !u.opsOn {
		return fmt.Errorf("%w: io_uring completion operations are off", ErrUnavailable)
	}
	if op.FD < 0 || op.FD >= MaxFD || op.Ptr == 0 || op.Len == 0 || op.Len > 1<<30 || op.Kind < OpRead || op.Kind > OpPwrite {
		return fmt.Errorf("io_uring: invalid operation %+v", op)
	}
	if (op.Kind == OpPread || op.Kind == OpPwrite) && op.Offset < 0 {
		return fmt.Errorf("io_uring: negative offset %d", op.Offset)
	}
	op.ID &= OpIDMask
	if op.ID>>32 >= 1<<24 || uint32(op.ID) >= 1<<30 {
		return fmt.Errorf("io_uring: operation id %#x out of range", op.ID)
	}
	e := u.opEntry(uint32(op.ID))
	if e.live {
		return fmt.Errorf("io_uring: operation slot %d already in flight", uint32(op.ID))
	}
	pos, err := u.queueOp(op)
	if err != nil {
		return err
	}
	*e = uringOp{op: op, live: true, ring: u.ring, sqPos: pos}
	u.inflight++
	if debugOps {
		fmt.Fprintf(os.Stderr, "submit %+v\n", op)
	}
	return u.submitNow(e)
}

// ErrOpNotSubmitted wraps EAGAIN: the kernel did not take an operation's
// SQE when SubmitOp entered the ring (its completion queue overflowed), and
// the operation was withdrawn. The caller waits for readiness instead.
var ErrOpNotSubmitted = fmt.Errorf("%w: io_uring did not take the operation at once; withdrawn", unix.EAGAIN)

// submitNow makes the kernel take e's SQE before SubmitOp returns, instead
// of at the next Wait like every other SQE. The kernel resolves an SQE's
// descriptor number when it takes it, and the caller read that number from
// its IO just before: a deferred SQE would be resolved only after other
// code had run (other fibers on this thread until the loop polls, other
// threads while the poll has released Ruby's lock), and if that code
// closed the IO and opened another file that got the same number, the
// operation would read that file's data or write into it (the data of a
// new pipe read by a fiber still parked on the closed one). Submitted now,
// the operation holds the file it was meant for, whatever happens to the
// number later. One io_uring_enter per operation; the next Wait has one
// SQE less to submit.
//
// An operation the kernel did not take is withdrawn: its SQE becomes a
// NOP whose completion is ignored, and the error is ErrOpNotSubmitted, or
// that of entering the ring (ErrForeignThread). Nothing is left queued
// that could run later on a number that changed hands.
func (u *URing) submitNow(e *uringOp) error {
	var err error
	for try := 0; try < 4 && !e.submitted(u.ring); try++ {
		// a ring rebuilt by enter (another submitting thread) has e
		// queued again but not submitted: the next round submits it
		_, err = u.enter(u.ring.publish(), 0, 0)
		if err != nil && err != unix.EINTR && !benignEnterErr(err) {
			break
		}
	}
	if e.submitted(u.ring) {
		return nil
	}
	if e.ring != nil && e.ring.sqeMem != nil {
		// still between the kernel's SQ head and our tail: ours to rewrite
		*e.ring.sqeAt(e.sqPos) = uringSQE{Opcode: uringOpNop, UserData: makeUD(udNop, 0, 0)}
	}
	e.live = false
	u.inflight--
	if err == nil || err == unix.EINTR || benignEnterErr(err) {
		err = ErrOpNotSubmitted
	}
	return err
}

// queueOp writes op's SQE and returns its SQ position.
func (u *URing) queueOp(op Op) (uint32, error) {
	s, err := u.sqe()
	if err != nil {
		return 0, err
	}
	pos := u.ring.tail - 1
	switch op.Kind {
	case OpRead, OpPread:
		s.Opcode = uringOpRead
	default:
		s.Opcode = uringOpWrite
	}
	s.Fd = op.FD
	s.Addr = uint64(op.Ptr)
	s.Len = op.Len
	if op.Kind == OpRead || op.Kind == OpWrite {
		s.Off = ^uint64(0) // the file position (streams ignore it)
	} else {
		s.Off = uint64(op.Offset)
	}
	s.UserData = udOp<<56 | op.ID
	return pos, nil
}

var debugOps = os.Getenv("FARCE_DEBUG_OPS") == "1"

func (u *URing) CancelOp(id uint64) error {
	id &= OpIDMask
	if debugOps {
		fmt.Fprintf(os.Stderr, "cancel %#x\n", id)
	}
	if int(uint32(id)) >= len(u.ops) {
		return nil
	}
	e := &u.ops[uint32(id)]
	if !e.live || e.op.ID != id {
		return nil // already reaped
	}
	e.cancelled = true
	return u.queueCancel(udOp<<56 | id)
}

func (u *URing) queueCancel(target uint64) error {
	s, err := u.sqe()
	if err != nil {
		return err
	}
	s.Opcode = uringOpAsyncCancel
	s.Fd = -1
	s.Addr = target
	s.UserData = makeUD(udCancel, 0, 0)
	return nil
}

// opCQE records the completion of an op; it reports false for a CQE that
// names no op in flight (never expected).
func (u *URing) opCQE(c uringCQE) bool {
	id := c.UserData & OpIDMask
	if int(uint32(id)) >= len(u.ops) {
		u.wasted++
		return false
	}
	e := &u.ops[uint32(id)]
	if debugOps {
		fmt.Fprintf(os.Stderr, "cqe %#x res %d live %v %#x\n", id, c.Res, e.live, e.op.ID)
	}
	if !e.live || e.op.ID != id {
		u.wasted++
		return false
	}
	e.live = false
	u.inflight--
	u.done = append(u.done, OpResult{ID: id, Result: int64(c.Res)})
	return true
}

// reapOps takes op completions out of the CQ, dropping everything else
// (used by rebuild and Close, where readiness no longer matters).
func (u *URing) reapOps() {
	r := u.ring
	head := atomic.LoadUint32(r.cqHead)
	tail := atomic.LoadUint32(r.cqTail)
	for ; head != tail; head++ {
		c := r.cqes[head&r.cqMask]
		if uint8(c.UserData>>56) == udOp {
			u.opCQE(c)
		}
	}
	atomic.StoreUint32(r.cqHead, head)
}

// opsSubmittedTo reports whether an op in flight was taken by ring r's
// kernel side.
func (u *URing) opsSubmittedTo(r *uringRing) bool {
	if u.inflight == 0 {
		return false
	}
	for i := range u.ops {
		if e := &u.ops[i]; e.live && e.submitted(r) {
			return true
		}
	}
	return false
}

// requeueOps queues every op still in flight on a new ring: only ops the
// old ring never submitted (rebuild checks opsSubmittedTo first).
func (u *URing) requeueOps() error {
	for i := range u.ops {
		if e := &u.ops[i]; e.live {
			pos, err := u.queueOp(e.op)
			if err != nil {
				return err
			}
			e.ring, e.sqPos = u.ring, pos
			if e.cancelled {
				if err := u.queueCancel(udOp<<56 | e.op.ID); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// DrainOps cancels every op in flight and waits, up to timeout (negative:
// no limit), for their completions; it returns how many are still in
// flight. Completions reaped meanwhile are handed out by Completions;
// readiness events are dropped (it is meant for shutting down). On a
// SINGLE_ISSUER ring entered from a thread other than its creator it
// returns ErrForeignThread without touching the ring; on a signal, EINTR:
// the caller runs its interrupts and calls again.
func (u *URing) DrainOps(timeout time.Duration) (int, error) {
	if u.ring == nil || u.inflight == 0 {
		return u.inflight, nil
	}
	for i := range u.ops {
		if e := &u.ops[i]; e.live && !e.cancelled {
			if err := u.queueCancel(udOp<<56 | e.op.ID); err != nil {
				return u.inflight, err
			}
			e.cancelled = true
		}
	}
	var deadline time.Time
	if timeout >= 0 {
		deadline = time.Now().Add(timeout)
	}
	for u.inflight > 0 {
		slice := 10 * time.Millisecond
		if timeout >= 0 {
			left := time.Until(deadline)
			if left <= 0 {
				break
			}
			if left < slice {
				slice = left
			}
		}
		u.ts = unix.NsecToTimespec(int64(slice))
		flags := uint32(uringEnterGetEvents)
		if u.noExt {
			if err := u.queueTimeout(); err != nil {
				return u.inflight, err
			}
		} else {
			u.arg = uringGeteventsArg{Ts: uint64(uintptr(unsafe.Pointer(&u.ts)))}
			flags |= uringEnterExtArg
		}
		_, err := uringEnter(u.ring.fd, u.ring.publish(), 1, flags, unsafe.Pointer(&u.arg), unsafe.Sizeof(u.arg))
		u.reapOps()
		switch {
		case err == nil || err == unix.ETIME || benignEnterErr(err):
		case err == unix.EEXIST:
			return u.inflight, ErrForeignThread // only the creator can reap them
		default:
			return u.inflight, err // EINTR included
		}
	}
	return u.inflight, nil
}

// drainOps is Close's last resort for ops the caller did not drain: a
// bounded DrainOps. Whatever is still in flight afterwards (another
// thread's ring) is cancelled by the kernel when the ring is closed, but
// the memory it names is the kernel's until then: callers must drain
// first (DrainOps on the thread that runs the ring).
func (u *URing) drainOps() {
	for {
		if _, err := u.DrainOps(time.Second); err != unix.EINTR {
			return
		}
	}
}
