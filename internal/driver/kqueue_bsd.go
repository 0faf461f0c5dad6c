//go:build darwin || freebsd || netbsd || openbsd

package driver

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// Kqueue is the driver for macOS and the BSDs. Like Epoll it registers each
// descriptor once per (fd, seq), edge-triggered (EV_CLEAR) for reading and
// writing, and leaves the registration alone until Disarm or close: a wait
// costs no registration call.
//
// Wakeups: Wake triggers an EVFILT_USER event where the system has one
// (macOS, FreeBSD), which needs no read to reset. WakeFD must still be a
// descriptor that a C unblock function can write 8 bytes to from a signal
// handler, so a non-blocking self-pipe is registered as well; on NetBSD and
// OpenBSD (no EVFILT_USER in x/sys) Wake writes to that pipe too.
//
// Process exits: WatchProcess registers EVFILT_PROC/NOTE_EXIT; the exit is
// reported once as Event{FD: -pid, Seq: seq, Events: Readable|Hangup} (see
// ProcessEvent).
//
// Priority (out-of-band data) is not reported: kqueue has no portable
// filter for it. Regular files and directories are refused with
// ErrNotPollable, because kqueue reports them readable in ways that do not
// match a blocking read (the same choice Go's os package makes).
type Kqueue struct {
	kq           int
	wakeR, wakeW int
	seqs         kqSeqs
	raw          []unix.Kevent_t
	mapped       []kqRaw
}

// NewKqueue creates a kqueue and its wakeup channels.
func NewKqueue() (*Kqueue, error) {
	kq, err := unix.Kqueue()
	if err != nil {
		return nil, fmt.Errorf("%w: kqueue: %v", ErrUnavailable, err)
	}
	unix.CloseOnExec(kq)
	k := &Kqueue{kq: kq, wakeR: -1, wakeW: -1, raw: make([]unix.Kevent_t, 256), mapped: make([]kqRaw, 0, 256)}
	var p [2]int
	if err := unix.Pipe(p[:]); err != nil {
		k.Close()
		return nil, fmt.Errorf("%w: pipe: %v", ErrUnavailable, err)
	}
	k.wakeR, k.wakeW = p[0], p[1]
	for _, fd := range p {
		unix.CloseOnExec(fd)
		if err := unix.SetNonblock(fd, true); err != nil {
			k.Close()
			return nil, fmt.Errorf("%w: set nonblock: %v", ErrUnavailable, err)
		}
	}
	// Level-triggered: Wait drains the pipe, and a byte it missed simply
	// reports again.
	changes := make([]unix.Kevent_t, 1, 2)
	unix.SetKevent(&changes[0], k.wakeR, unix.EVFILT_READ, unix.EV_ADD)
	if haveUserEvent {
		changes = append(changes, userEventChange(unix.EV_ADD|unix.EV_CLEAR, 0))
	}
	if _, err := unix.Kevent(kq, changes, nil, nil); err != nil {
		k.Close()
		return nil, fmt.Errorf("%w: kevent(wake): %v", ErrUnavailable, err)
	}
	return k, nil
}

func (k *Kqueue) Name() string     { return "kqueue" }
func (k *Kqueue) Persistent() bool { return true }
func (k *Kqueue) WakeFD() int      { return k.wakeW }

func (k *Kqueue) Arm(fd int, seq uint32, _ Events) error {
	if fd < 0 {
		return unix.EBADF
	}
	if cur, ok := k.seqs.get(fd); ok && cur == seq {
		return nil // already registered for this owner: nothing to do
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG, unix.S_IFDIR:
		return ErrNotPollable
	}
	var ch [2]unix.Kevent_t
	unix.SetKevent(&ch[0], fd, unix.EVFILT_READ, unix.EV_ADD|unix.EV_CLEAR)
	unix.SetKevent(&ch[1], fd, unix.EVFILT_WRITE, unix.EV_ADD|unix.EV_CLEAR)
	if _, err := unix.Kevent(k.kq, ch[:], nil, nil); err != nil {
		k.deleteFilters(fd) // one of the two may have been added
		k.seqs.clear(fd)
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENODEV) {
			// e.g. terminals on macOS, which kqueue does not support
			return ErrNotPollable
		}
		return fmt.Errorf("kevent(EV_ADD, fd %d): %w", fd, err)
	}
	k.seqs.set(fd, seq)
	return nil
}

// deleteFilters removes both registrations; ENOENT (never added) and EBADF
// (already closed, which removed them) are expected and ignored.
func (k *Kqueue) deleteFilters(fd int) error {
	var ch [2]unix.Kevent_t
	unix.SetKevent(&ch[0], fd, unix.EVFILT_READ, unix.EV_DELETE)
	unix.SetKevent(&ch[1], fd, unix.EVFILT_WRITE, unix.EV_DELETE)
	_, err := unix.Kevent(k.kq, ch[:], nil, nil)
	if err == unix.ENOENT || err == unix.EBADF {
		return nil
	}
	return err
}

func (k *Kqueue) Disarm(fd int) error {
	if fd < 0 {
		return nil
	}
	k.seqs.clear(fd)
	return k.deleteFilters(fd)
}

// WatchProcess asks for one Event when process pid exits. ESRCH means the
// process is already gone (reaped, or never a child): the caller should
// reap with waitpid(WNOHANG) instead of waiting.
func (k *Kqueue) WatchProcess(pid int, seq uint32) error {
	if pid <= 0 {
		return unix.EINVAL
	}
	var ch [1]unix.Kevent_t
	unix.SetKevent(&ch[0], pid, unix.EVFILT_PROC, unix.EV_ADD|unix.EV_ONESHOT)
	ch[0].Fflags = unix.NOTE_EXIT
	if _, err := unix.Kevent(k.kq, ch[:], nil, nil); err != nil {
		return fmt.Errorf("kevent(EVFILT_PROC, pid %d): %w", pid, err)
	}
	k.seqs.watch(pid, seq)
	return nil
}

func (k *Kqueue) Wait(buf []Event, timeout time.Duration) (int, error) {
	// Never take more kevents than buf can hold Events: an edge we read
	// and cannot report would be lost for good.
	max := len(buf)
	if max > len(k.raw) {
		max = len(k.raw)
	}
	if max == 0 {
		return 0, nil
	}
	var ts *unix.Timespec
	if timeout >= 0 {
		// kevent takes nanoseconds, so no rounding is needed: it never
		// returns before the deadline.
		t := unix.NsecToTimespec(int64(timeout))
		ts = &t
	}
	n, err := unix.Kevent(k.kq, nil, k.raw[:max], ts)
	if err != nil {
		return 0, err // EINTR included: the caller decides
	}
	k.mapped = k.mapped[:0]
	for i := 0; i < n; i++ {
		k.mapped = append(k.mapped, k.toRaw(&k.raw[i]))
	}
	out, woke := mergeKevents(k.mapped, &k.seqs, buf)
	if woke {
		k.drainWake()
	}
	return out, nil
}

// toRaw translates the OS-specific kevent into the portable form.
func (k *Kqueue) toRaw(e *unix.Kevent_t) kqRaw {
	r := kqRaw{
		ident: int(e.Ident),
		eof:   uint32(e.Flags)&unix.EV_EOF != 0,
		err:   uint32(e.Flags)&unix.EV_ERROR != 0,
	}
	switch int(e.Filter) {
	case unix.EVFILT_READ:
		r.filter = kqRead
		if r.ident == k.wakeR {
			r.filter = kqWake
		}
	case unix.EVFILT_WRITE:
		r.filter = kqWrite
	case unix.EVFILT_PROC:
		r.filter = kqProc
	default:
		if isUserEvent(e) {
			r.filter = kqWake
		}
	}
	return r
}

func (k *Kqueue) drainWake() {
	var b [64]byte
	for {
		n, err := unix.Read(k.wakeR, b[:])
		if n <= 0 || err != nil {
			return
		}
	}
}

func (k *Kqueue) Wake() error {
	if haveUserEvent {
		ch := []unix.Kevent_t{userEventChange(0, userTrigger)}
		_, err := unix.Kevent(k.kq, ch, nil, nil)
		return err
	}
	return writeWake(k.wakeW)
}

func (k *Kqueue) Close() error {
	var err error
	if k.kq >= 0 {
		err = unix.Close(k.kq)
	}
	if k.wakeR >= 0 {
		unix.Close(k.wakeR)
	}
	if k.wakeW >= 0 {
		unix.Close(k.wakeW)
	}
	k.kq, k.wakeR, k.wakeW = -1, -1, -1
	return err
}
