//go:build windows

package driver

import "golang.org/x/sys/windows"

// Probe asks, without blocking, which of events the socket fd is ready for.
// It uses WSAPoll with a zero timeout. When fd is not a socket, or WSAPoll
// fails, it returns 0 and a nil error, which means "unknown": the scheduler
// then tries the operation or waits, as it would for a descriptor that is
// not ready. Priority is not asked for (WSAPoll refuses POLLPRI).
func Probe(fd int, events Events) (Events, error) {
	const (
		pollRdNorm = 0x0100
		pollWrNorm = 0x0010
		pollErr    = 0x0001
		pollHup    = 0x0002
		pollNval   = 0x0004
	)
	var want int16
	if events&Readable != 0 {
		want |= pollRdNorm
	}
	if events&Writable != 0 {
		want |= pollWrNorm
	}
	if want == 0 || fd <= 0 {
		return 0, nil
	}
	fds := []wsaPollFD{{fd: windows.Handle(fd), events: want}}
	n, err := wsaPoll(fds, 0)
	if err != nil || n == 0 || fds[0].revents&pollNval != 0 {
		return 0, nil
	}
	var got Events
	r := fds[0].revents
	if r&pollRdNorm != 0 {
		got |= Readable
	}
	if r&pollWrNorm != 0 {
		got |= Writable
	}
	if r&(pollErr|pollHup) != 0 {
		got |= Readable | Writable | Hangup
	}
	return got & (events | Hangup), nil
}
