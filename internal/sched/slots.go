package sched

type slotState uint8

const (
	slotFree      slotState = iota
	slotParked              // waiting: linked into a descriptor list and/or the timer heap
	slotReady               // finished, queued in the ready ring
	slotCancelled           // cancelled while queued: dropped when dequeued
	slotDelivered           // handed out by Drain; freed by the next poll
)

type slot struct {
	gen      uint32
	state    slotState
	fd       int32 // -1 when not waiting on a descriptor
	interest Events
	prev     int32 // descriptor waiter list links (slot indexes, -1 = none)
	next     int32
	heapIdx  int32 // position in the timer heap, -1 when untimed
	deadline int64 // monotonic nanoseconds
	readyAt  int64 // when it finished (a timer: its deadline), for the wake-up latency
	result   int64
	// Completion operations (SubmitOp): op marks the slot as one, opFD is
	// its descriptor; cancelling: CancelOp asked the kernel to stop it;
	// orphan: Cancel abandoned it, so its completion frees the slot.
	op         bool
	cancelling bool
	orphan     bool
	opFD       int32
	// reserved: handed out by Reserve, no wait started on it yet (reserve.go)
	reserved bool
}

// slotTable allocates slots, reusing freed ones first (LIFO keeps them warm).
type slotTable struct {
	slots []slot
	free  []uint32
	inUse int
}

const maxSlots = 1 << 30

func (t *slotTable) alloc() (uint32, *slot) {
	var i uint32
	if n := len(t.free); n > 0 {
		i = t.free[n-1]
		t.free = t.free[:n-1]
	} else {
		if len(t.slots) >= maxSlots {
			panic("sched: too many concurrent waits")
		}
		t.slots = append(t.slots, slot{gen: 1})
		i = uint32(len(t.slots) - 1)
	}
	s := &t.slots[i]
	s.state = slotParked
	s.fd, s.prev, s.next, s.heapIdx = -1, -1, -1, -1
	s.interest, s.deadline, s.result = 0, 0, 0
	s.op, s.cancelling, s.orphan, s.opFD, s.reserved = false, false, false, -1, false
	t.inUse++
	return i, s
}

func (t *slotTable) release(i uint32) {
	s := &t.slots[i]
	s.state = slotFree
	s.gen++
	if s.gen == 0 {
		s.gen = 1
	}
	t.free = append(t.free, i)
	t.inUse--
}

// lookup returns the slot a token names, or nil when the token is stale,
// foreign or malformed.
func (t *slotTable) lookup(tok Token) (uint32, *slot) {
	i := tok.Slot()
	if uint64(i) >= uint64(len(t.slots)) {
		return 0, nil
	}
	s := &t.slots[i]
	if s.gen != tok.Gen() || s.state == slotFree {
		return 0, nil
	}
	return i, s
}
