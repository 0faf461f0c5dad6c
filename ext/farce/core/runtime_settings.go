package main

import (
	"os"
	"runtime"
	"time"
)

// coreMaxProcs is the core's GOMAXPROCS unless the environment the process
// started with sets GOMAXPROCS. The core runs no goroutines of its own: its
// Go code runs on the Ruby threads that call it, so Ps beyond two only add
// idle GC workers, and fixing the value stops Go's once-a-second check of
// the CPU limit. One is worse than two (measured, bench/README.md: Go's
// threads' CPU doubled): with a single P, the P a thread keeps while it is
// in C is the only one, so sysmon hands it off after one tick and wakes
// another thread to look for work that does not exist. That holds on a
// single CPU as well, where Go's own default is one P: a process pinned to
// one CPU (a Falcon worker, the benchmarks' server) or a container limited
// to one. There the handoffs' wake-ups made real Falcon's worker sleep and
// wake Go's threads 0.55 times per request against 0.06-0.42 with two Ps,
// and use 108 against 94 us of CPU per request (bench/falcon_serve.rb,
// docs/benchmarks.md).
const coreMaxProcs = 2

func init() {
	if _, set := os.LookupEnv("GOMAXPROCS"); !set && runtime.GOMAXPROCS(0) != coreMaxProcs {
		runtime.GOMAXPROCS(coreMaxProcs)
	}
	openGoPoller()
}

// openGoPoller makes Go open its own poller (on Linux an epoll descriptor
// and an eventfd, kept for the life of the process) now, while the core
// loads. Go opens it on the first timer any goroutine sets: the stall
// watchdog's ticker, or the runtime's own scavenger, at a moment nobody
// chooses. Opened then, the two descriptors appeared in the middle of a
// program's life, after a scheduler closed, looking like the scheduler's
// own epoll and wake descriptors left open (a leak check in CI saw exactly
// that). A timer added and stopped at once is enough to open it.
func openGoPoller() {
	time.AfterFunc(time.Hour, func() {}).Stop()
}
