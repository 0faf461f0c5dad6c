package sched

import (
	"errors"
	"syscall"

	"github.com/farce-rb/farce/internal/driver"
)

// Reserved waits: one call into the core fewer per wait. A
// fiber that must wait for a descriptor parks at once on a token the
// extension holds in reserve (handed out by an earlier poll), and the wait
// itself starts in the next poll, before it asks the driver (BindFD): every
// wait begun during one run of ready fibers costs no crossing of its own.
// Until it is bound a reserved slot is parked with no timer and no
// descriptor, as a YieldLast slot is; Cancel releases it like any park, and
// Wake finishes it like any untimed Park (BindPark, which only makes it
// count as pending, may come before or after).

// Reserve hands out a parked slot for a later BindFD.
func (s *Scheduler) Reserve() (Token, error) {
	if s.closed {
		return 0, ErrClosed
	}
	i, sl := s.slots.alloc()
	sl.reserved = true
	s.reserved++
	return makeToken(i, sl.gen), nil
}

// BindFD starts a descriptor wait without a timeout (WaitFD) on a reserved
// token. When the answer is known at once, the wait finishes now with the
// ready events, so that the poll hands it out; a descriptor that is closed
// finishes it with ResultClosed, and any other failure with the events
// asked for (the fiber's next call reports the error). It reports false
// when tok does not name a reserved wait (cancelled meanwhile, or never
// reserved): nothing is done then.
func (s *Scheduler) BindFD(tok Token, fd int, events Events, known Readiness) bool {
	i, sl := s.slots.lookup(tok)
	if sl == nil || !sl.reserved || sl.state != slotParked || s.closed {
		return false
	}
	sl.reserved = false
	s.reserved--
	ready, err := s.prepareFD(fd, events, known)
	switch {
	case err == nil && ready == 0: // it parks: the common case first (errors.Is is a call, even for nil)
		s.linkFD(i, sl, fd, events&driver.RubyMask)
	case err == nil:
		s.finish(i, int64(ready))
	case errors.Is(err, syscall.EBADF): // the drivers' unix.EBADF; syscall's builds for every GOOS
		s.finish(i, ResultClosed)
	default:
		s.finish(i, int64(readyOnError(events)))
	}
	return true
}

// BindPark makes a reserved token a plain Park without a timeout (it is one
// already, untimed and woken by Wake; from now on it also counts as a
// pending wait). It reports false when tok does not name a reserved wait
// (woken, cancelled, or never reserved).
func (s *Scheduler) BindPark(tok Token) bool {
	_, sl := s.slots.lookup(tok)
	if sl == nil || !sl.reserved || sl.state != slotParked {
		return false
	}
	sl.reserved = false
	s.reserved--
	return true
}

// readyOnError is what a bound wait that failed reports: the events asked
// for (never 0, which would read as a timeout), so that the fiber's next
// call runs and reports the error itself.
func readyOnError(events Events) Events {
	if e := events & driver.RubyMask; e != 0 {
		return e
	}
	return driver.Readable
}
