//go:build unix

package driver

import "golang.org/x/sys/unix"

func init() {
	eventMappers = append(eventMappers, eventMapper{"poll", func(r kernelReport) (Events, bool) {
		if r.readHangup {
			return 0, false // POLLRDHUP is Linux-only and not asked for
		}
		var m int16
		if r.readable {
			m |= unix.POLLIN
		}
		if r.priority {
			m |= unix.POLLPRI
		}
		if r.writable {
			m |= unix.POLLOUT
		}
		if r.hangup {
			m |= unix.POLLHUP
		}
		if r.err {
			m |= unix.POLLERR
		}
		return pollToEvents(m), true
	}})
}
