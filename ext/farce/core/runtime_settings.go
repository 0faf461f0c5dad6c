package main

import (
	"os"
	"runtime"
)

// coreMaxProcs is the core's GOMAXPROCS unless the environment the process
// started with sets GOMAXPROCS. The core runs no goroutines of its own: its
// Go code runs on the Ruby threads that call it, so Ps beyond two only add
// idle GC workers, and fixing the value stops Go's once-a-second check of
// the CPU limit. One is worse than two (measured, bench/README.md: Go's
// threads' CPU doubled): with a single P, the P a thread keeps while it is
// in C is the only one, so sysmon hands it off after one tick and wakes
// another thread to look for work that does not exist.
const coreMaxProcs = 2

func init() {
	if _, set := os.LookupEnv("GOMAXPROCS"); !set && runtime.NumCPU() > coreMaxProcs {
		runtime.GOMAXPROCS(coreMaxProcs)
	}
}
