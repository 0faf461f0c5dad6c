// The stall watchdog's glue: the turn state the extension hands over, the
// goroutine running sched.Watchdog that signals the loop's thread (tgkill)
// once per turn that lasts too long, and stopping it and freeing the state.

package main

/*
#include <stdlib.h>
#include "farce_core.h"
*/
import "C"

import (
	"time"
	"unsafe"

	"github.com/farce-rb/farce/internal/sched"
	"golang.org/x/sys/unix"
)

// watch makes state the core's turn state and (re)starts the watchdog on
// it with threshold; threshold <= 0 only stops it. Called with c.mu held.
func (c *core) watch(state *C.farce_turn_state, threshold time.Duration, sig unix.Signal) {
	c.turns = state
	c.stopWatchdog()
	if threshold <= 0 {
		return
	}
	w := sched.NewWatchdog((*sched.TurnState)(unsafe.Pointer(state)), threshold)
	stop, done := make(chan struct{}), make(chan struct{})
	c.stopWatch, c.watchDone = stop, done
	pid := unix.Getpid()
	go func() {
		defer close(done)
		w.Run(stop, monotonicNS, func(tid int64) { _ = unix.Tgkill(pid, int(tid), sig) })
	}()
}

// stopWatchdog ends the watchdog goroutine, if one runs, and waits for it:
// after this nothing reads the turn state. Called with c.mu held.
func (c *core) stopWatchdog() {
	if c.stopWatch == nil {
		return
	}
	close(c.stopWatch)
	<-c.watchDone
	c.stopWatch, c.watchDone = nil, nil
}

// monotonicNS is CLOCK_MONOTONIC, the clock the extension stamps turns with.
func monotonicNS() int64 { return nanotime() }

// dropTurns stops the watchdog and frees the turn state handed over by
// farce_stall_watch (at close: nothing reads or writes it after). Called
// with c.mu held.
func (c *core) dropTurns() {
	c.stopWatchdog()
	if c.turns != nil {
		C.free(unsafe.Pointer(c.turns))
		c.turns = nil
	}
}
