// Wake numbers: Windows' stand-in for a wake descriptor. The IOCP driver has
// no descriptor to write (it is woken with PostQueuedCompletionStatus), so
// farce_new hands the extension a number instead, and the extension's
// unblock functions call farce_wake_number with it where on Unix they
// write the descriptor. Numbers are never reused, so a late call with the
// number of a closed scheduler finds nothing and does nothing.

package main

/*
#include <stdint.h>
*/
import "C"

import (
	"sync"

	"github.com/farce-rb/farce/internal/driver"
)

var wakeNumbers struct {
	sync.Mutex
	last    int32
	drivers map[int32]driver.Driver
}

func wakeNumber(d driver.Driver) int {
	wakeNumbers.Lock()
	defer wakeNumbers.Unlock()
	if wakeNumbers.drivers == nil {
		wakeNumbers.drivers = map[int32]driver.Driver{}
	}
	wakeNumbers.last++
	wakeNumbers.drivers[wakeNumbers.last] = d
	return int(wakeNumbers.last)
}

func forgetWakeNumber(d driver.Driver) {
	wakeNumbers.Lock()
	defer wakeNumbers.Unlock()
	for n, known := range wakeNumbers.drivers {
		if known == d {
			delete(wakeNumbers.drivers, n)
		}
	}
}

// farce_wake_number wakes the scheduler whose wake number is n, from any
// thread, without its lock (Driver.Wake is safe from any thread). It returns
// 1 when n names a live scheduler, 0 when not.
//
//export farce_wake_number
func farce_wake_number(n C.int) C.int64_t {
	wakeNumbers.Lock()
	d := wakeNumbers.drivers[int32(n)]
	wakeNumbers.Unlock()
	if d == nil {
		return 0
	}
	_ = d.Wake()
	return 1
}
