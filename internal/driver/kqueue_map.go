package driver

// This file holds the part of the kqueue driver that is pure data
// transformation: turning a batch of kevents into Events. It has no build tag
// so that it is unit tested on Linux, where kqueue itself cannot run.

// kqFilter names a kevent filter independently of the OS: the numeric
// EVFILT_* values differ (NetBSD numbers them from 0 upward, the others from
// -1 downward), so the OS-specific code translates before calling in here.
type kqFilter uint8

const (
	kqOther kqFilter = iota // a filter we never register: ignored
	kqRead
	kqWrite
	kqProc // EVFILT_PROC with NOTE_EXIT: Ident is a pid
	kqWake // EVFILT_USER trigger or the wake pipe becoming readable
)

// kqRaw is one returned kevent, reduced to what the mapping needs.
type kqRaw struct {
	ident  int
	filter kqFilter
	eof    bool // EV_EOF: peer closed, or pipe/socket shut down
	err    bool // EV_ERROR: data holds an errno
}

// kqueueEvents maps one kevent to Ruby's event bits. EOF and errors set
// Readable|Writable|Hangup whatever the filter: the waiter then retries its
// read or write and that call reports the cause (EPIPE, ECONNRESET, 0 bytes),
// which is where Ruby wants to see it.
func kqueueEvents(r kqRaw) Events {
	var ev Events
	switch r.filter {
	case kqRead:
		ev = Readable
	case kqWrite:
		ev = Writable
	case kqProc:
		return Readable | Hangup
	default:
		return 0
	}
	if r.eof || r.err {
		ev |= Readable | Writable | Hangup
	}
	return ev
}

// processFD is the Event.FD under which a process exit is reported: the
// negated pid. Descriptors are never negative, so the two cannot collide.
func processFD(pid int) int32 { return -int32(pid) }

// ProcessEvent tells whether ev reports a process exit (from a driver with a
// WatchProcess method) and for which pid. It is portable so that the
// scheduler can call it on every system.
func ProcessEvent(ev Event) (pid int, ok bool) {
	if ev.FD < 0 {
		return int(-ev.FD), true
	}
	return 0, false
}

// kqSeqs is the table of armed descriptors and watched processes. kqueue's
// udata could carry the seq, but x/sys types it as *byte on most systems, and
// a Go pointer field must never hold a made-up integer (the garbage collector
// may inspect it). A table is safe because the kernel deletes a descriptor's
// knotes, queued events included, when the descriptor is closed, and Disarm
// deletes them explicitly: an event that kevent returns always belongs to the
// registration the table describes.
type kqSeqs struct {
	fds   []kqSlot // indexed by fd; descriptor numbers are small and dense
	procs map[int]uint32
	batch uint32 // stamps kqSlot.batch so merging a batch is O(n)
}

type kqSlot struct {
	seq   uint32
	armed bool
	batch uint32 // == kqSeqs.batch when pos is valid for the current batch
	pos   int32  // index in the output of the current batch
}

func (t *kqSeqs) get(fd int) (uint32, bool) {
	if fd < 0 || fd >= len(t.fds) || !t.fds[fd].armed {
		return 0, false
	}
	return t.fds[fd].seq, true
}

func (t *kqSeqs) set(fd int, seq uint32) {
	for fd >= len(t.fds) {
		t.fds = append(t.fds, make([]kqSlot, len(t.fds)+64)...)
	}
	t.fds[fd] = kqSlot{seq: seq, armed: true}
}

func (t *kqSeqs) watch(pid int, seq uint32) {
	if t.procs == nil {
		t.procs = map[int]uint32{}
	}
	t.procs[pid] = seq
}

func (t *kqSeqs) clear(fd int) {
	if fd >= 0 && fd < len(t.fds) {
		t.fds[fd] = kqSlot{}
	}
}

// mergeKevents turns a batch of raw kevents into at most len(out) Events,
// one per descriptor: a socket that became readable and writable in the same
// batch comes back from kqueue as two kevents, and the scheduler is better
// served by one Event carrying both bits. Events for descriptors that are not
// armed (disarmed between the kernel queuing and us reading) are dropped. It
// returns the number of Events written and whether a wakeup was among them.
func mergeKevents(raw []kqRaw, t *kqSeqs, out []Event) (n int, woke bool) {
	t.batch++
	for _, r := range raw {
		switch r.filter {
		case kqWake:
			woke = true
			continue
		case kqProc:
			seq, ok := t.procs[r.ident]
			if !ok {
				continue
			}
			delete(t.procs, r.ident) // a process exits once
			if n < len(out) {
				out[n] = Event{FD: processFD(r.ident), Seq: seq, Events: kqueueEvents(r)}
				n++
			}
			continue
		}
		ev := kqueueEvents(r)
		if ev == 0 {
			continue
		}
		seq, ok := t.get(r.ident)
		if !ok {
			continue
		}
		slot := &t.fds[r.ident]
		// The FD check guards against a stamp left from 2^32 batches ago.
		if slot.batch == t.batch && int(slot.pos) < n && out[slot.pos].FD == int32(r.ident) {
			out[slot.pos].Events |= ev
			continue
		}
		if n < len(out) {
			slot.batch, slot.pos = t.batch, int32(n)
			out[n] = Event{FD: int32(r.ident), Seq: seq, Events: ev}
			n++
		}
	}
	return n, woke
}
