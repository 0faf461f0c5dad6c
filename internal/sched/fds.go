package sched

import "github.com/farce-rb/farce/internal/driver"

// Events re-exports the driver's event bits, which are Ruby's.
type Events = driver.Events

// Readiness is what the caller of WaitFD knows about the descriptor.
type Readiness uint8

const (
	// KnownNothing: the caller has not just failed an operation (Ruby's io_wait
	// hook). An edge consumed earlier may have left data behind, so the
	// scheduler probes the kernel unless an edge is already pending.
	KnownNothing Readiness = iota
	// KnownNotReady: the caller's read or write just returned EAGAIN. Edges seen
	// before that are stale; park until the next one.
	KnownNotReady
	// KnownDrained: the caller's last read on this stream returned less than it
	// asked for, so the descriptor was empty then. Park unless an edge or a
	// hang-up arrived since.
	KnownDrained
	// askKernel (WaitFD's own, for KnownNothing with a zero timeout): the
	// caller wants the answer of this instant and waits for no edge, so
	// neither the edges seen nor a direction known empty since the last one
	// may answer for the kernel (see prepareFD).
	askKernel
)

// pollability of a descriptor, learned from the driver.
const (
	pollUnknown int8 = iota
	pollYes
	pollNo
)

// fdState is the scheduler's knowledge of one descriptor number.
type fdState struct {
	seq        uint32 // bumped when the number changes hands; echoed by the driver
	file       FileID // the open file the number was last said to name (SetFDFile); zero: not known
	registered bool   // persistent drivers: Arm done for this seq
	armed      Events // one-shot drivers: interest currently armed
	pollable   int8
	ready      Events // edges seen and not yet consumed by a wait
	notReady   Events // directions known empty since the last edge
	hangup     bool   // peer hung up or error: every later wait finishes at once
	readEOF    bool   // peer shut down its writing side: every later read wait finishes at once
	head, tail int32  // waiter list (slot indexes)
	waiters    int32
	ops        int32 // completion operations in flight on this number
}

// maxFD bounds the descriptor table; Ruby hands us real descriptors, so a
// larger number is a bug in the caller, reported as an error.
const maxFD = driver.MaxFD

type fdTable struct {
	fds        []fdState
	registered int
	opFDs      int // descriptors with completion operations in flight
}

func (t *fdTable) get(fd int) *fdState {
	if fd >= len(t.fds) {
		n := len(t.fds) * 2
		if n < 64 {
			n = 64
		}
		for n <= fd {
			n *= 2
		}
		nt := make([]fdState, n)
		copy(nt, t.fds)
		for i := len(t.fds); i < n; i++ {
			nt[i] = fdState{seq: 1, head: -1, tail: -1}
		}
		t.fds = nt
	}
	return &t.fds[fd]
}

// lookup returns the state of fd only if the table has it.
func (t *fdTable) lookup(fd int) *fdState {
	if fd < 0 || fd >= len(t.fds) {
		return nil
	}
	return &t.fds[fd]
}
