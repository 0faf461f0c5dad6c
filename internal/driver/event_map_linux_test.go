//go:build linux

package driver

import "golang.org/x/sys/unix"

// epoll's mapping is also io_uring's: a POLL_ADD completion carries epoll
// flags (uring_linux.go).
func init() {
	eventMappers = append(eventMappers, eventMapper{"epoll and io_uring", func(r kernelReport) (Events, bool) {
		var m uint32
		if r.readable {
			m |= unix.EPOLLIN
		}
		if r.priority {
			m |= unix.EPOLLPRI
		}
		if r.writable {
			m |= unix.EPOLLOUT
		}
		if r.hangup {
			m |= unix.EPOLLHUP
		}
		if r.err {
			m |= unix.EPOLLERR
		}
		if r.readHangup {
			m |= unix.EPOLLRDHUP
		}
		return epollToEvents(m), true
	}})
}
