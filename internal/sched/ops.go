package sched

import (
	"errors"
	"fmt"
	"time"

	"github.com/farce-rb/farce/internal/driver"
)

// Completion operations: a read or write the driver performs with the
// caller's memory (driver.Completer, io_uring). The wait's slot goes
// through these states:
//
//	submitted  (slotParked, op)             SubmitOp queued it
//	cancelling (slotParked, op, cancelling) CancelOp/ForgetFD asked the kernel to stop it
//	reaped     (slotReady, then slotDelivered) its completion arrived: the result is
//	           the byte count or -errno (-ECANCELED when the cancel won)
//	released   (slotFree)                   freed by the poll after its delivery
//
// Only "reaped" ends the kernel's use of the memory: the slot (and the
// extension's pin of the memory's owner) lives until then, whatever happens to
// the waiting fiber. Cancel of an op slot makes it an orphan, freed at its
// completion without delivery.

// ErrNoOps is returned by SubmitOp when the driver performs no operations.
var ErrNoOps = errors.New("the driver does not perform I/O operations")

// SupportsOps reports whether SubmitOp can be used.
func (s *Scheduler) SupportsOps() bool { return s.comp != nil && !s.closed }

// opID is the driver's name for the operation of slot i: 24 bits of
// generation above the 32-bit slot index.
func opID(i uint32, gen uint32) uint64 { return uint64(gen&0xffffff)<<32 | uint64(i) }

// SubmitOp starts an operation; its completion carries the driver's result
// (bytes or -errno). kind may carry driver.OpAsync. ptr/length name memory the caller keeps valid until
// the completion has been delivered by Drain.
func (s *Scheduler) SubmitOp(kind driver.OpKind, fd int, ptr uintptr, length uint64, offset int64) (Token, error) {
	if s.closed {
		return 0, ErrClosed
	}
	if s.comp == nil {
		return 0, ErrNoOps
	}
	if err := ValidateFD(fd); err != nil {
		return 0, err
	}
	if ptr == 0 || length == 0 {
		return 0, fmt.Errorf("fd %d: empty buffer for an operation", fd)
	}
	async := kind&driver.OpAsync != 0
	kind &^= driver.OpAsync
	if kind < driver.OpRead || kind > driver.OpPwrite {
		return 0, fmt.Errorf("invalid operation kind %d", kind)
	}
	if length > 1<<30 {
		length = 1 << 30 // a partial transfer, as read(2) may do
	}
	i, sl := s.slots.alloc()
	err := s.comp.SubmitOp(driver.Op{Kind: kind, FD: int32(fd), Ptr: ptr, Len: uint32(length), Offset: offset, ID: opID(i, sl.gen), Async: async})
	if err != nil {
		s.slots.release(i)
		return 0, err
	}
	sl.op = true
	sl.opFD = int32(fd)
	st := s.fds.get(fd)
	if st.ops == 0 {
		s.fds.opFDs++
	}
	st.ops++
	return makeToken(i, sl.gen), nil
}

// CancelOp asks the driver to stop the operation tok names. It reports
// true when the operation is still in flight (its completion, usually
// -ECANCELED, follows) and false when it already completed (its completion
// is queued or delivered) or tok names no operation.
func (s *Scheduler) CancelOp(tok Token) bool {
	i, sl := s.slots.lookup(tok)
	if sl == nil || !sl.op || sl.state != slotParked {
		return false
	}
	if !sl.cancelling {
		s.comp.CancelOp(opID(i, sl.gen))
		sl.cancelling = true
	}
	return true
}

// cancelOpsOn cancels the operations in flight on fd (it was closed).
func (s *Scheduler) cancelOpsOn(fd int) {
	for i := range s.slots.slots {
		sl := &s.slots.slots[i]
		if sl.op && sl.state == slotParked && sl.opFD == int32(fd) && !sl.cancelling {
			s.comp.CancelOp(opID(uint32(i), sl.gen))
			sl.cancelling = true
		}
	}
}

// OpsInFlight is how many operations have not completed yet (their memory
// is still the kernel's).
func (s *Scheduler) OpsInFlight() int {
	if s.comp == nil || s.closed {
		return 0
	}
	return s.comp.OpsInFlight()
}

// DrainOps cancels every operation in flight and waits up to timeout
// (negative: no limit) for their completions, which finish their waits
// (Drain hands them out). It returns how many are still in flight: the
// memory of those must stay valid. Errors: driver.ErrForeignThread (call it
// from the thread that runs the scheduler), EINTR (run interrupts, call
// again). An extension that is about to release the memory of every operation
// (closing the scheduler) calls this until it returns 0.
func (s *Scheduler) DrainOps(timeout time.Duration) (int, error) {
	if s.comp == nil || s.closed {
		return 0, nil
	}
	for i := range s.slots.slots {
		if sl := &s.slots.slots[i]; sl.op && sl.state == slotParked {
			sl.cancelling = true // the driver cancels them all below
		}
	}
	left := s.comp.OpsInFlight()
	var err error
	if d, ok := s.comp.(driver.Drainer); ok {
		left, err = d.DrainOps(timeout)
	}
	for _, r := range s.comp.Completions() {
		s.deliverOp(r)
	}
	return left, err
}

// deliverOp applies one operation completion.
func (s *Scheduler) deliverOp(r driver.OpResult) {
	i := uint32(r.ID)
	if uint64(i) >= uint64(len(s.slots.slots)) {
		return
	}
	sl := &s.slots.slots[i]
	if !sl.op || sl.state != slotParked || sl.gen&0xffffff != uint32(r.ID>>32) {
		return
	}
	if st := s.fds.lookup(int(sl.opFD)); st != nil {
		if st.ops > 0 {
			st.ops--
			if st.ops == 0 {
				s.fds.opFDs--
			}
		}
		// The operation consumed or produced data behind the readiness
		// cache's back: what it knew to be empty may not be any more.
		st.notReady = 0
	}
	if sl.orphan {
		s.slots.release(i)
		return
	}
	s.finish(i, r.Result)
}
