// One poll under a core's lock, the path farce_poll, farce_poll_noting and
// farce_poll_batch share: the lock released while the driver sleeps
// (pollRelease), so that stats and wakes from other threads get through,
// and the sysmon tick (sched_tick.go) after the lock is released.

package main

/*
#include "farce_core.h"
*/
import "C"

import (
	"errors"
	"syscall"
	"unsafe"

	"github.com/farce-rb/farce/internal/sched"
)

// pollRelease is what Scheduler.Poll unlocks while the driver sleeps: for
// that time the driver is in use outside c.mu, so polling is set (calls that
// touch the driver refuse, close waits) and cleared, with a broadcast to a
// waiting close, when the poll takes the lock back.
type pollRelease struct{ c *core }

func (r pollRelease) Unlock() { r.c.polling = true; r.c.mu.Unlock() }
func (r pollRelease) Lock()   { r.c.mu.Lock(); r.c.polling = false; r.c.idle.Broadcast() }

func poll(h C.int64_t, blockNS C.int64_t, out *C.farce_completion, capacity C.int, resumed []int64) C.int64_t {
	var before func(*core) C.int64_t
	if resumed != nil { // farce_poll_noting: its caller keeps the histogram
		before = func(c *core) C.int64_t { c.s.RecordWakeups(true); return 0 }
	}
	return pollWith(h, blockNS, out, capacity, resumed, nil, before)
}

// pollWith is poll that first runs before (if any) under the core's lock;
// a negative code from it is returned without polling. *at (if not nil)
// gets the scheduler's clock (CLOCK_MONOTONIC ns) at the end of the poll,
// 0 when it did not poll.
func pollWith(h C.int64_t, blockNS C.int64_t, out *C.farce_completion, capacity C.int, resumed []int64,
	at *int64, before func(*core) C.int64_t) C.int64_t {
	c := lookup(h)
	if c == nil {
		return -C.FARCE_E_HANDLE
	}
	if out == nil || capacity <= 0 {
		return -C.FARCE_E_ARGUMENT
	}
	var polledAt int64 // the scheduler's clock (nanotime) at the end of the poll; 0: no poll
	// after c.mu is released (deferred calls run last-in first-out)
	defer func() {
		if polledAt != 0 {
			c.tick.refreshAt(polledAt)
		}
	}()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.s.Closed() {
		return -C.FARCE_E_HANDLE
	}
	if c.polling {
		return c.fail(errBusyPolling)
	}
	if resumed != nil {
		c.s.NoteResumed(resumed)
	}
	if before != nil {
		if r := before(c); r < 0 {
			return r
		}
	}
	comps := unsafe.Slice((*sched.Completion)(unsafe.Pointer(out)), int(capacity))
	n, err := c.s.Poll(comps, durationNS(blockNS), pollRelease{c}) // c.mu is unlocked while it sleeps, for stats and wakes
	polledAt = c.s.PolledAt()
	if at != nil {
		*at = polledAt
	}
	// Interrupted with work already drained: hand it out; the caller runs
	// Ruby's interrupts after every kernel wait anyway.
	if err != nil && (n == 0 || !errors.Is(err, syscall.EINTR)) {
		return c.fail(err)
	}
	return C.int64_t(n)
}
