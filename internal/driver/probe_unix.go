//go:build unix

package driver

import "golang.org/x/sys/unix"

// Probe asks the kernel, without blocking, which of events fd is ready for.
// The scheduler uses it only when it has no cached knowledge of the
// descriptor (a wait that did not follow an EAGAIN of its own), and for a
// wait with a zero timeout, which asks about this instant.
func Probe(fd int, events Events) (Events, error) {
	pfd := []unix.PollFd{{Fd: int32(fd), Events: eventsToPoll(events)}}
	for {
		n, err := unix.Poll(pfd, 0)
		if err == unix.EINTR {
			continue // a zero-timeout poll cannot delay a signal
		}
		if err != nil || n == 0 {
			return 0, err
		}
		if pfd[0].Revents&unix.POLLNVAL != 0 {
			return 0, unix.EBADF
		}
		return pollToEvents(pfd[0].Revents) & (events | Hangup), nil
	}
}
