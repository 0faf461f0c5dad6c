// The handle map and each core's lock: which scheduler a handle names
// (lookup, one atomic load and no lock), opening and removing handles, and
// the lock every call takes (acquire, acquireDriver) with the rule that a
// call touching the driver refuses while a poll sleeps in it.

package main

/*
#include "farce_core.h"
*/
import "C"

import (
	"errors"
	"sync"
	"sync/atomic"

	"github.com/farce-rb/farce/internal/driver"
	"github.com/farce-rb/farce/internal/sched"
)

// core is one scheduler behind a handle. mu serialises the loop thread with
// other Ruby threads asking for stats or closing; it is released while the
// driver blocks, and polling says so: the driver is then in use outside
// the lock, so calls that touch it (arming, forgetting, submitting
// operations) refuse (errBusyPolling) instead of racing with it (the poll
// driver's map, io_uring's submission queue), and close waits for the
// poll to end (after waking it) instead of freeing the driver under it.
type core struct {
	mu      sync.Mutex
	idle    sync.Cond // broadcast when polling ends
	polling bool
	s       *sched.Scheduler
	lastErr string
	tick    schedTick // sched_tick.go: keeps sysmon from taking this thread's P

	turns     *C.farce_turn_state // handed over by farce_stall_watch; freed at close
	stopWatch chan struct{}       // closes the running watchdog, if any
	watchDone chan struct{}
}

// errBusyPolling: a call that touches the driver arrived while the loop's
// thread waits in it: it came from another thread.
var errBusyPolling = errors.New("the scheduler's loop is waiting on another thread; use a scheduler only from the thread that runs it (Fiber::Scheduler#unblock wakes a fiber from any thread)")

// acquireDriver is acquire for calls that touch the driver: nil with code
// set when the handle is unknown or the driver is busy in a poll.
func acquireDriver(h C.int64_t, code *C.int64_t) *core {
	c := acquire(h)
	if c == nil {
		*code = -C.FARCE_E_HANDLE
		return nil
	}
	if c.polling {
		*code = c.fail(errBusyPolling)
		c.mu.Unlock()
		return nil
	}
	return c
}

// The live handles. Writers (open, close) hold handlesMu and publish a
// fresh copy of the map in handleSnap; lookup, which every call makes,
// reads the published copy with one atomic load and no lock (an RWMutex's
// RLock and RUnlock are two atomic read-modify-writes per call, and a
// ping-pong round trip makes two calls).
var (
	handlesMu  sync.Mutex
	handles    = map[int64]*core{}
	handleSnap atomic.Pointer[map[int64]*core]
	nextID     int64
)

// publishHandles makes handles what lookup sees. Called with handlesMu held.
func publishHandles() {
	snap := make(map[int64]*core, len(handles))
	for id, c := range handles {
		snap[id] = c
	}
	handleSnap.Store(&snap)
}

func lookup(h C.int64_t) *core {
	if snap := handleSnap.Load(); snap != nil {
		return (*snap)[int64(h)]
	}
	return nil
}

// acquire returns the core behind h with its lock held, or nil.
func acquire(h C.int64_t) *core {
	c := lookup(h)
	if c != nil {
		c.mu.Lock()
	}
	return c
}

// setHandleBase makes the handles opened from now on start after base;
// false when handles were opened already, or base is below one handed out.
func setHandleBase(base C.int64_t) bool {
	handlesMu.Lock()
	defer handlesMu.Unlock()
	if base < 0 || len(handles) > 0 || nextID > int64(base) {
		return false
	}
	nextID = int64(base)
	return true
}

// openHandle makes a scheduler over d and returns its new handle.
func openHandle(d driver.Driver) int64 {
	handlesMu.Lock()
	nextID++
	id := nextID
	c := &core{s: sched.New(d, nanotime)} // CLOCK_MONOTONIC: the extension stamps resumes with it
	c.idle.L = &c.mu
	handles[id] = c
	publishHandles()
	handlesMu.Unlock()
	return id
}

// removeHandle takes h out of the map and returns its core (nil when h is
// unknown): no later lookup finds it.
func removeHandle(h C.int64_t) *core {
	handlesMu.Lock()
	c := handles[int64(h)]
	delete(handles, int64(h))
	publishHandles()
	handlesMu.Unlock()
	return c
}

// waitPollEnd returns once no poll runs in c's driver, waking a running one
// first: the driver may then be freed. Called with c.mu held.
func (c *core) waitPollEnd() {
	for c.polling { // never free the driver under a running poll: end it first
		c.s.Driver().Wake()
		c.idle.Wait()
	}
}
