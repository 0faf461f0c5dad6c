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
}

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
	if op.FD < 0 || op.Ptr == 0 || op.Len == 0 || op.Len > 1<<30 || op.Kind < OpRead || op.Kind > OpPwrite {
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
	if err := u.queueOp(op); err != nil {
		return err
	}
	*e = uringOp{op: op, live: true}
	u.inflight++
	if debugOps {
		fmt.Fprintf(os.Stderr, "submit %+v\n", op)
	}
	return nil
}

func (u *URing) queueOp(op Op) error {
	s, err := u.sqe()
	if err != nil {
		return err
	}
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
	return nil
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

// requeueOps queues every op still in flight on a new ring.
func (u *URing) requeueOps() error {
	for i := range u.ops {
		if e := &u.ops[i]; e.live {
			if err := u.queueOp(e.op); err != nil {
				return err
			}
			if e.cancelled {
				if err := u.queueCancel(udOp<<56 | e.op.ID); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// drainOps cancels every op in flight and waits (up to a second) for their
// completions, so that no kernel access to their memory outlives Close.
func (u *URing) drainOps() {
	if u.inflight == 0 || u.ring == nil {
		return
	}
	for i := range u.ops {
		if u.ops[i].live {
			if u.queueCancel(udOp<<56|u.ops[i].op.ID) != nil {
				break
			}
		}
	}
	deadline := time.Now().Add(time.Second)
	for u.inflight > 0 && time.Now().Before(deadline) {
		u.ts = unix.NsecToTimespec(int64(10 * time.Millisecond))
		u.arg = uringGeteventsArg{Ts: uint64(uintptr(unsafe.Pointer(&u.ts)))}
		flags := uint32(uringEnterGetEvents)
		if !u.noExt {
			flags |= uringEnterExtArg
		}
		_, err := uringEnter(u.ring.fd, u.ring.publish(), 1, flags, unsafe.Pointer(&u.arg), unsafe.Sizeof(u.arg))
		u.reapOps()
		if err != nil && err != unix.ETIME && err != unix.EINTR && !benignEnterErr(err) {
			break // EEXIST: another thread's ring; the kernel cancels on close
		}
	}
}
