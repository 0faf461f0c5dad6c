//go:build unix

package driver

import (
	"fmt"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Poll is the portable poll(2) driver. It is one-shot: an Arm is reported
// once, then forgotten, so a descriptor nobody waits on never makes the loop
// spin. Each Wait costs O(armed descriptors); it is the fallback, not the
// fast path.
type Poll struct {
	wakeR, wakeW int
	interest     map[int32]pollInterest
	fds          []unix.PollFd
	calls        atomic.Uint64 // system calls made (KernelCalls)
}

type pollInterest struct {
	seq    uint32
	events Events
}

// NewPoll creates a poll driver with a self-pipe for wakeups.
func NewPoll() (*Poll, error) {
	var p [2]int
	if err := unix.Pipe(p[:]); err != nil {
		return nil, fmt.Errorf("%w: pipe: %v", ErrUnavailable, err)
	}
	for _, fd := range p {
		unix.CloseOnExec(fd)
		if err := unix.SetNonblock(fd, true); err != nil {
			unix.Close(p[0])
			unix.Close(p[1])
			return nil, fmt.Errorf("%w: set nonblock: %v", ErrUnavailable, err)
		}
	}
	return &Poll{wakeR: p[0], wakeW: p[1], interest: map[int32]pollInterest{}}, nil
}

func (p *Poll) KernelCalls() KernelCalls { return KernelCalls{Total: p.calls.Load()} }

func (p *Poll) Name() string     { return "poll" }
func (p *Poll) Persistent() bool { return false }
func (p *Poll) WakeFD() int      { return p.wakeW }
func (p *Poll) Wake() error      { return writeWake(p.wakeW) }

func (p *Poll) Arm(fd int, seq uint32, events Events) error {
	cur, ok := p.interest[int32(fd)]
	if ok && cur.seq == seq {
		events |= cur.events
	}
	p.interest[int32(fd)] = pollInterest{seq: seq, events: events & RubyMask}
	return nil
}

func (p *Poll) Disarm(fd int) error {
	delete(p.interest, int32(fd))
	return nil
}

func (p *Poll) Wait(buf []Event, timeout time.Duration) (int, error) {
	p.fds = append(p.fds[:0], unix.PollFd{Fd: int32(p.wakeR), Events: unix.POLLIN})
	for fd, in := range p.interest {
		p.fds = append(p.fds, unix.PollFd{Fd: fd, Events: eventsToPoll(in.events)})
	}
	p.calls.Add(1)
	_, err := unix.Poll(p.fds, timeoutMillis(timeout))
	if err != nil {
		return 0, err
	}
	if p.fds[0].Revents != 0 {
		p.drainWake()
	}
	n := 0
	for _, pfd := range p.fds[1:] {
		if pfd.Revents == 0 || n == len(buf) {
			continue
		}
		in := p.interest[pfd.Fd]
		ev := pollToEvents(pfd.Revents)
		if pfd.Revents&unix.POLLNVAL != 0 {
			// Closed behind our back: report it so the waiter retries and
			// sees EBADF, and stop polling the number.
			ev = Readable | Writable | Hangup
		}
		buf[n] = Event{FD: pfd.Fd, Seq: in.seq, Events: ev}
		n++
		delete(p.interest, pfd.Fd) // one-shot
	}
	return n, nil
}

func eventsToPoll(e Events) int16 {
	var m int16
	if e&Readable != 0 {
		m |= unix.POLLIN
	}
	if e&Priority != 0 {
		m |= unix.POLLPRI
	}
	if e&Writable != 0 {
		m |= unix.POLLOUT
	}
	return m
}

func pollToEvents(m int16) Events {
	var e Events
	if m&unix.POLLIN != 0 {
		e |= Readable
	}
	if m&unix.POLLPRI != 0 {
		e |= Priority
	}
	if m&unix.POLLOUT != 0 {
		e |= Writable
	}
	if m&(unix.POLLERR|unix.POLLHUP) != 0 {
		e |= Readable | Writable | Hangup
	}
	return e
}

func (p *Poll) drainWake() {
	var b [64]byte
	for {
		p.calls.Add(1)
		n, err := unix.Read(p.wakeR, b[:])
		if n <= 0 || err != nil {
			return
		}
	}
}

func (p *Poll) Close() error {
	err := unix.Close(p.wakeR)
	unix.Close(p.wakeW)
	p.wakeR, p.wakeW = -1, -1
	return err
}
