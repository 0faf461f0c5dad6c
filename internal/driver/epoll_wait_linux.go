package driver

import (
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// epoll_wait takes its timeout in whole milliseconds, rounded up so that a
// wait never ends before its timer: every timer then fires up to 1 ms late
// (0.5 ms on average, measured as farce's timer lateness p50 against
// io-event's). epoll_pwait2 (Linux 5.11) takes a timespec; without it the
// millisecond call remains.
var noPwait2 atomic.Bool

func epollWait(epfd int, events []unix.EpollEvent, timeout time.Duration) (int, error) {
	if timeout == 0 && len(events) > 0 {
		// Cannot block: a raw system call, without telling the runtime
		// (entersyscall/exitsyscall cost about a third of a busy loop's
		// poll). epoll_pwait with no signal mask is epoll_wait on every
		// architecture.
		r, _, errno := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(epfd), uintptr(unsafe.Pointer(&events[0])),
			uintptr(len(events)), 0, 0, 0)
		if errno != 0 {
			return 0, errno
		}
		return int(r), nil
	}
	if timeout <= 0 || noPwait2.Load() {
		return unix.EpollWait(epfd, events, timeoutMillis(timeout))
	}
	ts := unix.NsecToTimespec(int64(timeout))
	r, _, errno := unix.Syscall6(unix.SYS_EPOLL_PWAIT2, uintptr(epfd), uintptr(unsafe.Pointer(&events[0])),
		uintptr(len(events)), uintptr(unsafe.Pointer(&ts)), 0, 0)
	if errno == unix.ENOSYS || errno == unix.EPERM { // an old kernel, or a seccomp filter that does not know it
		noPwait2.Store(true)
		return unix.EpollWait(epfd, events, timeoutMillis(timeout))
	}
	if errno != 0 {
		return 0, errno
	}
	return int(r), nil
}
