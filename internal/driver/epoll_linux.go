//go:build linux

package driver

import (
	"fmt"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Epoll is the Linux driver. Like Go's netpoller it registers each descriptor
// once, edge-triggered for both directions, and never touches the
// registration again until the descriptor changes hands: a wait costs no
// epoll_ctl. The registration's data word carries the fd and a sequence
// number so that events for a closed-and-reused descriptor are recognised.
type Epoll struct {
	epfd   int
	wakefd int // eventfd
	raw    []unix.EpollEvent
	calls  atomic.Uint64 // system calls made (KernelCalls)
}

func (e *Epoll) KernelCalls() KernelCalls { return KernelCalls{Total: e.calls.Load()} }

const wakeSeq = ^uint32(0)

// NewEpoll creates an epoll instance and its eventfd wakeup.
func NewEpoll() (*Epoll, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("%w: epoll_create1: %v", ErrUnavailable, err)
	}
	wfd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(epfd)
		return nil, fmt.Errorf("%w: eventfd: %v", ErrUnavailable, err)
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN}
	setData(&ev, int32(wfd), wakeSeq)
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, wfd, &ev); err != nil {
		unix.Close(wfd)
		unix.Close(epfd)
		return nil, fmt.Errorf("%w: epoll_ctl(eventfd): %v", ErrUnavailable, err)
	}
	return &Epoll{epfd: epfd, wakefd: wfd, raw: make([]unix.EpollEvent, 256)}, nil
}

func (e *Epoll) Name() string     { return "epoll" }
func (e *Epoll) Persistent() bool { return true }
func (e *Epoll) WakeFD() int      { return e.wakefd }

// setData stores fd and seq in the 64-bit data word (x/sys splits it into
// Fd and Pad).
func setData(ev *unix.EpollEvent, fd int32, seq uint32) {
	ev.Fd = fd
	ev.Pad = int32(seq)
}

func (e *Epoll) Arm(fd int, seq uint32, _ Events) error {
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLOUT | unix.EPOLLRDHUP | unix.EPOLLPRI | unix.EPOLLET}
	setData(&ev, int32(fd), seq)
	e.calls.Add(1)
	err := unix.EpollCtl(e.epfd, unix.EPOLL_CTL_ADD, fd, &ev)
	switch err {
	case nil:
		return nil
	case unix.EEXIST:
		// The same open file is still registered under this number (an
		// earlier IO object for the same descriptor): take it over.
		e.calls.Add(1)
		return unix.EpollCtl(e.epfd, unix.EPOLL_CTL_MOD, fd, &ev)
	case unix.EPERM:
		return ErrNotPollable
	default:
		return fmt.Errorf("epoll_ctl(ADD, fd %d): %w", fd, err)
	}
}

func (e *Epoll) Disarm(fd int) error {
	e.calls.Add(1)
	err := unix.EpollCtl(e.epfd, unix.EPOLL_CTL_DEL, fd, nil)
	if err == unix.ENOENT || err == unix.EBADF || err == unix.EPERM {
		return nil
	}
	return err
}

func (e *Epoll) Wait(buf []Event, timeout time.Duration) (int, error) {
	max := len(buf)
	if max > len(e.raw) {
		max = len(e.raw)
	}
	if max == 0 {
		return 0, nil
	}
	e.calls.Add(1)
	n, err := epollWait(e.epfd, e.raw[:max], timeout)
	if err != nil {
		return 0, err // EINTR included: the caller decides
	}
	out := 0
	for i := 0; i < n; i++ {
		r := &e.raw[i]
		seq := uint32(r.Pad)
		if seq == wakeSeq && int(r.Fd) == e.wakefd {
			e.drainWake()
			continue
		}
		buf[out] = Event{FD: r.Fd, Seq: seq, Events: epollToEvents(r.Events)}
		out++
	}
	return out, nil
}

func epollToEvents(m uint32) Events {
	var ev Events
	if m&(unix.EPOLLIN|unix.EPOLLRDHUP) != 0 {
		ev |= Readable
	}
	if m&unix.EPOLLPRI != 0 {
		ev |= Priority
	}
	if m&unix.EPOLLOUT != 0 {
		ev |= Writable
	}
	if m&(unix.EPOLLERR|unix.EPOLLHUP) != 0 {
		ev |= Readable | Writable | Hangup
	}
	if m&unix.EPOLLRDHUP != 0 {
		ev |= ReadHangup
	}
	return ev
}

func (e *Epoll) drainWake() {
	var b [8]byte
	e.calls.Add(1)
	unix.Read(e.wakefd, b[:])
}

func (e *Epoll) Wake() error { return writeWake(e.wakefd) }

func (e *Epoll) Close() error {
	err1 := unix.Close(e.wakefd)
	err2 := unix.Close(e.epfd)
	e.wakefd, e.epfd = -1, -1
	if err1 != nil {
		return err1
	}
	return err2
}
