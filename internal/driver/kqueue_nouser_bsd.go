//go:build netbsd || openbsd

package driver

import "golang.org/x/sys/unix"

// NetBSD (before 10) and OpenBSD have no EVFILT_USER, and x/sys does not
// define it for them: Wake writes to the wake pipe instead.
const haveUserEvent = false

const userTrigger = 0

func userEventChange(flags int, fflags uint32) unix.Kevent_t { return unix.Kevent_t{} }

func isUserEvent(e *unix.Kevent_t) bool { return false }
