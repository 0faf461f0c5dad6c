// The stall watchdog's glue: the turn state the extension hands over, the
// goroutine running sched.Watchdog that signals the loop's thread (tgkill,
// in watchdog_unix.go) once per turn that lasts too long, and stopping it
// and freeing the state.

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
)

// watch makes state the core's turn state and (re)starts the watchdog on
// it with threshold; threshold <= 0 only stops it. It fails where threads
// cannot be signalled (Windows). Called with c.mu held.
func (c *core) watch(state *C.farce_turn_state, threshold time.Duration, sig int) error {
	c.turns = state
	c.stopWatchdog()
	if threshold <= 0 {
		return nil
	}
	signal, err := threadSignaller(sig)
	if err != nil {
		return err
	}
	w := sched.NewWatchdog((*sched.TurnState)(unsafe.Pointer(state)), threshold)
	stop, done := make(chan struct{}), make(chan struct{})
	c.stopWatch, c.watchDone = stop, done
	go func() {
		defer close(done)
		w.Run(stop, monotonicNS, signal)
	}()
	return nil
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

// monotonicNS is the clock the extension stamps turns with (clock_*.go).
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
