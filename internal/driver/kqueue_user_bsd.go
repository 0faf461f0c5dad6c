//go:build darwin || freebsd

package driver

import "golang.org/x/sys/unix"

// macOS and FreeBSD have EVFILT_USER: a wakeup that is one kevent call to
// trigger and nothing to reset (EV_CLEAR), where a pipe costs a write and a
// read.
const haveUserEvent = true

// wakeIdent is the EVFILT_USER identifier; user events have their own
// namespace, so 0 collides with no descriptor.
const wakeIdent = 0

const userTrigger = unix.NOTE_TRIGGER

func userEventChange(flags int, fflags uint32) unix.Kevent_t {
	var k unix.Kevent_t
	unix.SetKevent(&k, wakeIdent, unix.EVFILT_USER, flags)
	k.Fflags = fflags
	return k
}

func isUserEvent(e *unix.Kevent_t) bool {
	return int(e.Filter) == unix.EVFILT_USER && int(e.Ident) == wakeIdent
}
