package driver

import "fmt"

// This file is the lifecycle of an overlapped operation on Windows, kept
// free of Windows calls (and of a build tag) so that it is unit tested and
// fuzzed on every system.
//
// An overlapped operation hands the kernel memory (an OVERLAPPED or
// IO_STATUS_BLOCK, and for AFD polls the poll record) that the kernel writes
// when the operation finishes, possibly long after the call that started it
// returned, and even after it was cancelled. The one rule is therefore: that
// memory is reused or released only after the operation's completion packet
// was taken off the port. The states:
//
//	prepared   slot taken, memory ours, nothing started
//	submitted  the kernel owns the memory; exactly one packet will come
//	completed  the packet was reaped; the memory is ours again, results readable
//	retired    back on the free list (state free, generation bumped)
//
// A submission the kernel refused synchronously (no packet will come) goes
// back from submitted to retired through Failed.
//
// Each operation is named by an opID: slot index and generation. The
// generation changes at every retirement, so a packet that names a retired
// operation (a duplicate, or a stray post by someone else) no longer
// matches and is dropped instead of being taken for the slot's next user.
// Freed slots are reused in FIFO order, which keeps a generation alive as
// long as possible.

type opState uint8

const (
	opFree opState = iota
	opPrepared
	opSubmitted
	opCompleted
)

func (s opState) String() string {
	return [...]string{"free", "prepared", "submitted", "completed"}[s]
}

// opID is slot | generation<<32. Generations start at 1, so an opID is
// never 0: an AFD poll's ApcContext must be non-zero for the kernel to post
// a completion packet at all.
type opID uint64

func makeOpID(slot, gen uint32) opID { return opID(uint64(gen)<<32 | uint64(slot)) }
func (id opID) slot() uint32         { return uint32(id) }
func (id opID) gen() uint32          { return uint32(id >> 32) }

// opVerdict classifies a reaped completion packet.
type opVerdict uint8

const (
	opOK        opVerdict = iota // first packet of a submitted operation
	opStray                      // names no operation we have in flight
	opDuplicate                  // names an operation already completed
)

type opSlot[P any] struct {
	gen       uint32
	state     opState
	cancelled bool
	payload   P // the kernel-visible memory; kept and reused with the slot
}

// opTable tracks operations whose memory is of type P (a pointer). It is
// used from the driver's goroutine only.
type opTable[P any] struct {
	slots    []opSlot[P]
	free     []uint32 // FIFO queue of free slots, from freeHead on
	freeHead int
	inflight int // slots in state submitted
	alloc    func() P
}

func newOpTable[P any](alloc func() P) *opTable[P] {
	return &opTable[P]{alloc: alloc}
}

// prepare takes a free slot. Its payload is either fresh or the memory of a
// retired operation, which the kernel no longer references.
func (t *opTable[P]) prepare() (opID, P) {
	var i uint32
	if t.freeHead < len(t.free) {
		i = t.free[t.freeHead]
		t.freeHead++
		if t.freeHead > 64 && t.freeHead*2 > len(t.free) {
			t.free = append(t.free[:0], t.free[t.freeHead:]...)
			t.freeHead = 0
		}
	} else {
		i = uint32(len(t.slots))
		t.slots = append(t.slots, opSlot[P]{gen: 1, payload: t.alloc()})
	}
	s := &t.slots[i]
	s.state, s.cancelled = opPrepared, false
	return makeOpID(i, s.gen), s.payload
}

// lookup returns the slot named by id if the generation matches.
func (t *opTable[P]) lookup(id opID) (*opSlot[P], bool) {
	i := id.slot()
	if uint64(i) >= uint64(len(t.slots)) {
		return nil, false
	}
	s := &t.slots[i]
	if s.gen != id.gen() || s.state == opFree {
		return nil, false
	}
	return s, true
}

func (t *opTable[P]) transition(id opID, from, to opState) (*opSlot[P], error) {
	s, ok := t.lookup(id)
	if !ok {
		return nil, fmt.Errorf("op %#x: not live", uint64(id))
	}
	if s.state != from {
		return nil, fmt.Errorf("op %#x: %v, want %v", uint64(id), s.state, from)
	}
	s.state = to
	return s, nil
}

// submit records that the kernel now owns the operation's memory. Call it
// just before the system call that starts the operation, so that the
// memory is never ours and the kernel's at once.
func (t *opTable[P]) submit(id opID) error {
	if _, err := t.transition(id, opPrepared, opSubmitted); err != nil {
		return err
	}
	t.inflight++
	return nil
}

// failed retires an operation whose start call failed synchronously, which
// means no completion packet will come.
func (t *opTable[P]) failed(id opID) error {
	s, ok := t.lookup(id)
	if !ok || (s.state != opSubmitted && s.state != opPrepared) {
		return fmt.Errorf("op %#x: failed in wrong state", uint64(id))
	}
	if s.state == opSubmitted {
		t.inflight--
	}
	s.state = opCompleted
	return t.retire(id)
}

// cancel notes that a cancellation was requested. The operation stays
// submitted, and its memory the kernel's, until its packet arrives (with
// STATUS_CANCELLED, or with its result if it won the race). It reports
// whether the caller should issue the cancel call (first request only).
func (t *opTable[P]) cancel(id opID) bool {
	s, ok := t.lookup(id)
	if !ok || s.state != opSubmitted || s.cancelled {
		return false
	}
	s.cancelled = true
	return true
}

// complete classifies a reaped packet naming id. For opOK the payload may be
// read (the kernel has finished writing it) and cancelled tells whether a
// cancellation had been requested.
func (t *opTable[P]) complete(id opID) (p P, cancelled bool, v opVerdict) {
	s, ok := t.lookup(id)
	if !ok || s.state == opPrepared {
		return p, false, opStray
	}
	if s.state == opCompleted {
		return p, false, opDuplicate
	}
	s.state = opCompleted
	t.inflight--
	return s.payload, s.cancelled, opOK
}

// retire returns a completed operation's slot, and its memory, for reuse.
// It refuses a submitted operation: that memory is still the kernel's.
func (t *opTable[P]) retire(id opID) error {
	s, err := t.transition(id, opCompleted, opFree)
	if err != nil {
		return err
	}
	s.gen++
	if s.gen == 0 {
		s.gen = 1
	}
	t.free = append(t.free, id.slot())
	return nil
}

// state reports the state of id (opFree for ids that are not live).
func (t *opTable[P]) state(id opID) opState {
	s, ok := t.lookup(id)
	if !ok {
		return opFree
	}
	return s.state
}

// inFlight is the number of submitted operations.
func (t *opTable[P]) inFlight() int { return t.inflight }

// eachSubmitted calls fn for every submitted operation (to cancel them at
// shutdown).
func (t *opTable[P]) eachSubmitted(fn func(id opID, p P)) {
	for i := range t.slots {
		s := &t.slots[i]
		if s.state == opSubmitted {
			fn(makeOpID(uint32(i), s.gen), s.payload)
		}
	}
}

// abandon is for a shutdown that gave up waiting for packets: it hands the
// payloads of still-submitted operations to keep, which must hold them for
// the life of the process, because the kernel may still write them.
func (t *opTable[P]) abandon(keep func(P)) {
	for i := range t.slots {
		if t.slots[i].state == opSubmitted {
			keep(t.slots[i].payload)
		}
	}
	t.slots, t.free, t.freeHead, t.inflight = nil, nil, 0, 0
}
