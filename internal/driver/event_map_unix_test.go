//go:build unix

package driver

import "golang.org/x/sys/unix"

func init() {
	eventMappers = append(eventMappers, eventMapper{"poll", func(r kernelReport) (Events, bool) {
		// POLLRDHUP is Linux-only and not asked for
		m, ok := kernelBits{unix.POLLIN, unix.POLLPRI, unix.POLLOUT, unix.POLLHUP, unix.POLLERR, 0}.encode(r)
		return pollToEvents(int16(m)), ok
	}})
}
