package sched

// readyRing is the FIFO of finished waits, a growable ring buffer of slot
// indexes: pushing and popping never allocate once it has grown.
type readyRing struct {
	buf        []uint32
	head, size int
}

func (r *readyRing) push(i uint32) {
	if r.size == len(r.buf) {
		n := len(r.buf) * 2
		if n == 0 {
			n = 64
		}
		nb := make([]uint32, n)
		for k := 0; k < r.size; k++ {
			nb[k] = r.buf[(r.head+k)%len(r.buf)]
		}
		r.buf, r.head = nb, 0
	}
	r.buf[(r.head+r.size)%len(r.buf)] = i
	r.size++
}

func (r *readyRing) pop() (uint32, bool) {
	if r.size == 0 {
		return 0, false
	}
	i := r.buf[r.head]
	r.head = (r.head + 1) % len(r.buf)
	r.size--
	return i, true
}

func (r *readyRing) len() int { return r.size }
