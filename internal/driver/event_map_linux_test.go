//go:build linux

package driver

import "golang.org/x/sys/unix"

// epoll's mapping is also io_uring's: a POLL_ADD completion carries epoll
// flags (uring_linux.go).
func init() {
	eventMappers = append(eventMappers, eventMapper{"epoll and io_uring", func(r kernelReport) (Events, bool) {
		m, ok := kernelBits{unix.EPOLLIN, unix.EPOLLPRI, unix.EPOLLOUT, unix.EPOLLHUP, unix.EPOLLERR, unix.EPOLLRDHUP}.encode(r)
		return epollToEvents(m), ok
	}})
}
