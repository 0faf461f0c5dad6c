// The core's clock on Windows: QueryPerformanceCounter in nanoseconds,
// converted exactly as ext/farce/clock.h converts it, so that the stamps the
// extension writes and the scheduler's clock agree. (The runtime's own
// nanotime reads another counter, the interrupt time, whose origin differs.)

package main

import (
	"unsafe"

	"golang.org/x/sys/windows"
)

var (
	kernel32        = windows.NewLazySystemDLL("kernel32.dll")
	procQPCounter   = kernel32.NewProc("QueryPerformanceCounter")
	procQPFrequency = kernel32.NewProc("QueryPerformanceFrequency")
	qpcFrequency    = func() int64 {
		var f int64
		if r, _, _ := procQPFrequency.Call(uintptr(unsafe.Pointer(&f))); r == 0 || f <= 0 {
			panic("farce: QueryPerformanceFrequency failed")
		}
		return f
	}()
)

func nanotime() int64 {
	var c int64
	procQPCounter.Call(uintptr(unsafe.Pointer(&c)))
	return c/qpcFrequency*1_000_000_000 + c%qpcFrequency*1_000_000_000/qpcFrequency
}
