package sched

// timerHeap is a binary min-heap of slot indexes ordered by deadline. Each
// slot records its own position so a cancelled or woken wait leaves the heap
// in O(log n).
type timerHeap struct {
	items []uint32
	slots *slotTable
}

func (h *timerHeap) less(a, b int) bool {
	return h.slots.slots[h.items[a]].deadline < h.slots.slots[h.items[b]].deadline
}

func (h *timerHeap) swap(a, b int) {
	h.items[a], h.items[b] = h.items[b], h.items[a]
	h.slots.slots[h.items[a]].heapIdx = int32(a)
	h.slots.slots[h.items[b]].heapIdx = int32(b)
}

func (h *timerHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(i, p) {
			return
		}
		h.swap(i, p)
		i = p
	}
}

func (h *timerHeap) down(i int) {
	n := len(h.items)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && h.less(r, l) {
			m = r
		}
		if !h.less(m, i) {
			return
		}
		h.swap(i, m)
		i = m
	}
}

func (h *timerHeap) push(slotIdx uint32) {
	h.items = append(h.items, slotIdx)
	i := len(h.items) - 1
	h.slots.slots[slotIdx].heapIdx = int32(i)
	h.up(i)
}

func (h *timerHeap) remove(slotIdx uint32) {
	s := &h.slots.slots[slotIdx]
	i := int(s.heapIdx)
	if i < 0 {
		return
	}
	last := len(h.items) - 1
	if i != last {
		h.swap(i, last)
	}
	h.items = h.items[:last]
	s.heapIdx = -1
	if i != last {
		h.down(i)
		h.up(i)
	}
}

// peek returns the earliest deadline's slot, or false when empty.
func (h *timerHeap) peek() (uint32, bool) {
	if len(h.items) == 0 {
		return 0, false
	}
	return h.items[0], true
}

func (h *timerHeap) len() int { return len(h.items) }
