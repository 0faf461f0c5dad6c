package sched

import (
	"fmt"

	"github.com/farce-rb/farce/internal/driver"
)

// checkInvariants verifies the internal consistency of the scheduler's data
// structures: slot states and counts, the timer heap and its back-indexes,
// the descriptor waiter lists, the ready ring and the delivered batch. It is
// meant for tests and fuzzing; it costs O(slots + descriptors).
func (s *Scheduler) checkInvariants() error {
	slots := s.slots.slots
	n := len(slots)

	// Free list: distinct, in range, free.
	onFree := make([]bool, n)
	for _, i := range s.slots.free {
		if int(i) >= n {
			return fmt.Errorf("free list holds out-of-range slot %d", i)
		}
		if onFree[i] {
			return fmt.Errorf("slot %d twice on the free list", i)
		}
		onFree[i] = true
	}
	inUse := 0
	for i := range slots {
		sl := &slots[i]
		if sl.gen == 0 {
			return fmt.Errorf("slot %d has generation 0", i)
		}
		if (sl.state == slotFree) != onFree[i] {
			return fmt.Errorf("slot %d: state %d but on free list = %v", i, sl.state, onFree[i])
		}
		if sl.state != slotFree {
			inUse++
		}
		if sl.state != slotParked {
			if sl.heapIdx != -1 || sl.fd != -1 || sl.prev != -1 || sl.next != -1 {
				if sl.state != slotFree {
					return fmt.Errorf("slot %d in state %d still linked (heap %d fd %d)", i, sl.state, sl.heapIdx, sl.fd)
				}
			}
		}
	}
	reserved := 0
	for i := range slots {
		if slots[i].reserved {
			if slots[i].state != slotParked || slots[i].fd != -1 || slots[i].heapIdx != -1 {
				return fmt.Errorf("reserved slot %d in state %d (fd %d heap %d)", i, slots[i].state, slots[i].fd, slots[i].heapIdx)
			}
			reserved++
		}
	}
	if reserved != s.reserved {
		return fmt.Errorf("reserved = %d, counted %d", s.reserved, reserved)
	}
	if inUse != s.slots.inUse {
		return fmt.Errorf("inUse = %d, counted %d", s.slots.inUse, inUse)
	}

	// Timer heap: back-indexes and heap order.
	h := s.timers.items
	inHeap := make([]bool, n)
	for k, i := range h {
		if int(i) >= n {
			return fmt.Errorf("heap[%d] = out-of-range slot %d", k, i)
		}
		if inHeap[i] {
			return fmt.Errorf("slot %d twice in the heap", i)
		}
		inHeap[i] = true
		sl := &slots[i]
		if sl.state != slotParked {
			return fmt.Errorf("heap[%d] = slot %d in state %d", k, i, sl.state)
		}
		if int(sl.heapIdx) != k {
			return fmt.Errorf("heap[%d] = slot %d whose heapIdx is %d", k, i, sl.heapIdx)
		}
		if k > 0 {
			p := (k - 1) / 2
			if slots[h[p]].deadline > sl.deadline {
				return fmt.Errorf("heap order: parent %d (deadline %d) > child %d (deadline %d)", p, slots[h[p]].deadline, k, sl.deadline)
			}
		}
	}
	for i := range slots {
		if slots[i].state == slotParked && slots[i].heapIdx >= 0 && !inHeap[i] {
			return fmt.Errorf("slot %d has heapIdx %d but is not in the heap", i, slots[i].heapIdx)
		}
	}

	// Descriptor waiter lists.
	listed := make([]bool, n)
	registered := 0
	persistent := s.drv != nil && s.drv.Persistent()
	for fd := range s.fds.fds {
		st := &s.fds.fds[fd]
		if st.seq == 0 || st.seq == ^uint32(0) {
			return fmt.Errorf("fd %d has reserved seq %d", fd, st.seq)
		}
		if persistent && st.registered || !persistent && st.armed != 0 {
			registered++
		}
		var count int32
		prev := int32(-1)
		for i := st.head; i >= 0; i = slots[i].next {
			if int(i) >= n {
				return fmt.Errorf("fd %d list holds out-of-range slot %d", fd, i)
			}
			if listed[i] {
				return fmt.Errorf("fd %d: slot %d listed twice (cycle?)", fd, i)
			}
			listed[i] = true
			sl := &slots[i]
			if sl.state != slotParked || int(sl.fd) != fd {
				return fmt.Errorf("fd %d list: slot %d has state %d fd %d", fd, i, sl.state, sl.fd)
			}
			if sl.prev != prev {
				return fmt.Errorf("fd %d list: slot %d prev %d, want %d", fd, i, sl.prev, prev)
			}
			if sl.interest == 0 || sl.interest&^driver.RubyMask != 0 {
				return fmt.Errorf("fd %d list: slot %d has interest %v", fd, i, sl.interest)
			}
			if persistent && !st.registered {
				return fmt.Errorf("fd %d has waiter %d but is not registered", fd, i)
			}
			if !persistent && sl.interest&^st.armed != 0 {
				return fmt.Errorf("fd %d: waiter %d wants %v but only %v is armed", fd, i, sl.interest, st.armed)
			}
			prev = i
			count++
		}
		if st.tail != prev {
			return fmt.Errorf("fd %d tail %d, want %d", fd, st.tail, prev)
		}
		if count != st.waiters {
			return fmt.Errorf("fd %d waiters = %d, listed %d", fd, st.waiters, count)
		}
		if count > 0 && (st.pollable == pollNo || st.hangup) {
			return fmt.Errorf("fd %d has waiters but pollable=%d hangup=%v", fd, st.pollable, st.hangup)
		}
	}
	if registered != s.fds.registered {
		return fmt.Errorf("registered = %d, counted %d", s.fds.registered, registered)
	}
	for i := range slots {
		if slots[i].state == slotParked && slots[i].fd >= 0 && !listed[i] {
			return fmt.Errorf("slot %d waits on fd %d but is not in its list", i, slots[i].fd)
		}
	}

	// Ready ring: exactly the ready and cancelled slots, once each.
	inRing := make([]bool, n)
	cancelled := 0
	for k := 0; k < s.ready.size; k++ {
		i := s.ready.buf[(s.ready.head+k)%len(s.ready.buf)]
		if int(i) >= n {
			return fmt.Errorf("ready ring holds out-of-range slot %d", i)
		}
		if inRing[i] {
			return fmt.Errorf("slot %d twice in the ready ring", i)
		}
		inRing[i] = true
		switch slots[i].state {
		case slotReady:
		case slotCancelled:
			cancelled++
		default:
			return fmt.Errorf("ready ring holds slot %d in state %d", i, slots[i].state)
		}
	}
	if cancelled != s.cancelled {
		return fmt.Errorf("cancelled = %d, counted %d in the ring", s.cancelled, cancelled)
	}
	for i := range slots {
		if st := slots[i].state; (st == slotReady || st == slotCancelled) && !inRing[i] {
			return fmt.Errorf("slot %d in state %d is not in the ready ring", i, st)
		}
	}

	// Delivered batch: exactly the delivered slots, once each.
	inBatch := make([]bool, n)
	for _, i := range s.delivered {
		if int(i) >= n || inBatch[i] || slots[i].state != slotDelivered {
			return fmt.Errorf("delivered batch holds bad slot %d", i)
		}
		inBatch[i] = true
	}
	for i := range slots {
		if slots[i].state == slotDelivered && !inBatch[i] {
			return fmt.Errorf("slot %d delivered but not in the batch", i)
		}
	}
	return nil
}
