//go:build !windows

// The core's clock: the runtime's CLOCK_MONOTONIC reading, the clock the
// extension stamps turns and resumes with (ext/farce/clock.h).

package main

import _ "unsafe" // go:linkname

// nanotime is the runtime's CLOCK_MONOTONIC reading (vDSO, no system call),
// the clock the extension's turn and resume stamps use.
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64
