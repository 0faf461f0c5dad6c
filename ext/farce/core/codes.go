// What crosses the C ABI besides handles: Go errors turned into the codes
// of farce_core.h (fail, with the message kept for farce_last_error), 1/0
// answers, strings copied into C buffers, timeouts from nanoseconds.

package main

/*
#include "farce_core.h"
*/
import "C"

import (
	"errors"
	"syscall"
	"time"
	"unsafe"

	"github.com/farce-rb/farce/internal/driver"
	"github.com/farce-rb/farce/internal/sched"
)

// boolCode is the 1/0 answer of the exports that report whether a wait was
// still pending.
func boolCode(b bool) C.int64_t {
	if b {
		return 1
	}
	return 0
}

// fail records err for farce_last_error and returns its code.
func (c *core) fail(err error) C.int64_t {
	c.lastErr = err.Error()
	var errno syscall.Errno
	switch {
	case errors.Is(err, errBusyPolling), errors.Is(err, driver.ErrForeignThread):
		return -C.FARCE_E_THREAD // Farce::Error with the message: not a system error
	case errors.As(err, &errno):
		return -C.int64_t(errno)
	case errors.Is(err, sched.ErrClosed):
		return -C.FARCE_E_HANDLE
	default:
		return -C.FARCE_E_ARGUMENT
	}
}

func copyOut(dst *C.char, n C.int, s string) {
	if dst == nil || n <= 0 {
		return
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(dst)), int(n))
	k := copy(b[:len(b)-1], s)
	b[k] = 0
}

func durationNS(ns C.int64_t) time.Duration {
	if ns < 0 {
		return -1
	}
	return time.Duration(ns)
}
