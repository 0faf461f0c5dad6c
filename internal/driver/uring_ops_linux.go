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
// remembers every op until its CQE has been reaped, so that Close can wait
// for them: the memory an op names is the caller's until its OpResult is
// returned.
//
// When the kernel takes an op. The kernel resolves an SQE's descriptor
// number when it takes the SQE, not when SubmitOp queued it. In between,
// the caller's thread runs other code (other fibers, until the loop polls),
// and if that code closed the IO and opened another file that got the same
// number, the op would read that file's data or write into it. So:
//
//   - SubmitOp only queues the SQE (u.queued), and Wait is the one enter
//     that submits op SQEs: its caller (the extension's poll, farce_loop_poll)
//     has just checked, with Ruby's lock held, that every op queued since
//     the last poll still names its IO's descriptor, and cancelled those
//     that do not. Wait(0) never defers them to the blocking Wait, which
//     runs with the lock released. An op Wait could not submit is
//     withdrawn when Wait returns: it was checked for this poll only.
//   - Any other enter (sqe() flushing a full SQ; a rebuild on a change of
//     thread) withdraws the queued ops first instead of submitting them
//     unchecked: they complete with -EAGAIN, and the caller waits for
//     readiness and transfers plainly.
//   - CancelOp of a queued op withdraws it: it completes with -ECANCELED
//     and never runs. One the kernel has taken is cancelled with
//     IORING_OP_ASYNC_CANCEL.
//
// Withdrawn means: the SQE becomes a NOP (it is still ours to rewrite,
// between the kernel's SQ head and our tail; no SQPOLL), and the OpResult
// is handed out by the next Completions.

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
	cancelled bool // CancelOp was called (DrainOps need not ask again)
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
	u.queued = append(u.queued, queuedOp{slot: uint32(op.ID), id: op.ID})
	if debugOps {
		fmt.Fprintf(os.Stderr, "submit %+v\n", op)
	}
	return nil
}

// queuedOp names an op SubmitOp queued since the last Wait (it may have
// been withdrawn and its slot reused since: id tells).
type queuedOp struct {
	slot uint32
	id   uint64
}

// unsubmitted returns the op (slot, id) if its SQE is still in the current
// ring's SQ, not taken by the kernel.
func (u *URing) unsubmitted(slot uint32, id uint64) *uringOp {
	if int(slot) >= len(u.ops) {
		return nil
	}
	e := &u.ops[slot]
	if !e.live || e.op.ID != id || e.ring != u.ring || e.submitted(u.ring) {
		return nil
	}
	return e
}

// withdraw takes back an op whose SQE the kernel has not taken: the SQE
// becomes a NOP and the op completes with res (-errno) at once.
func (u *URing) withdraw(e *uringOp, res int32) {
	if e.ring != nil && e.ring.sqeMem != nil {
		*e.ring.sqeAt(e.sqPos) = uringSQE{Opcode: uringOpNop, UserData: makeUD(udNop, 0, 0)}
	}
	e.live = false
	u.inflight--
	u.done = append(u.done, OpResult{ID: e.op.ID, Result: int64(res)})
	if debugOps {
		fmt.Fprintf(os.Stderr, "withdraw %#x res %d\n", e.op.ID, res)
	}
}

// withdrawQueued withdraws every op queued since the last Wait that the
// kernel has not taken, with -EAGAIN: before an enter that is not Wait's
// (their descriptors were not checked for it), and when Wait returns (they
// were checked for that Wait only).
func (u *URing) withdrawQueued() {
	for _, q := range u.queued {
		if e := u.unsubmitted(q.slot, q.id); e != nil {
			u.withdraw(e, -int32(unix.EAGAIN))
		}
	}
	u.queued = u.queued[:0]
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
	if op.Async {
		s.Flags |= uringSQEAsync
	}
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
	if u.unsubmitted(uint32(id), id) != nil {
		u.withdraw(e, -int32(unix.ECANCELED)) // never taken: it never runs
		return nil
	}
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

// withdrawForRebuild withdraws every op in flight with -EAGAIN: only ops
// the old ring never submitted (rebuild checks opsSubmittedTo first). They
// are not queued again on the new ring, whose next enter may come after
// other code ran on their descriptor numbers (the rebuild's own enter
// returns without submitting): their callers wait for readiness instead.
func (u *URing) withdrawForRebuild() {
	for i := range u.ops {
		if e := &u.ops[i]; e.live {
			u.withdraw(e, -int32(unix.EAGAIN))
		}
	}
	u.queued = u.queued[:0]
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
			// a queued one is withdrawn, a submitted one cancelled
			if err := u.CancelOp(e.op.ID); err != nil {
				return u.inflight, err
			}
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
		u.enters.Add(1)
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
