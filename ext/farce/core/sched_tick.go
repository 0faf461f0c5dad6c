package main

import (
	"os"
	"runtime"
	"sync/atomic"
	"time"
)

// Keeping sysmon quiet. A Ruby thread's calls into the core all run on one
// goroutine locked to that thread, which never passes through Go's scheduler,
// so its P's schedule tick never moves. Go's monitor thread (sysmon) takes
// such a P as a goroutine that has run too long (10 ms on one tick: it
// preempts it, and since the thread is in C, takes the P), and after taking
// a P it polls every 20 µs for the next millisecond and backs off only
// slowly. Under steady load that repeated every 10 ms and cost ~5% of a CPU
// in sysmon and in idle Ms it woke (bench/README.md, the Go threads' CPU
// rows). Passing through the scheduler at most every schedTickEvery moves
// the tick, so sysmon sees a goroutine that yields and stays asleep. Each
// core keeps its own clock: a core is polled by the one thread that runs
// it, and every such thread's goroutine needs its tick moved.
const schedTickEvery = 4 * time.Millisecond

// schedTick is a core's time (monotonic ns, nanotime in clock.go) of its last pass through the scheduler.
type schedTick struct{ last atomic.Int64 }

// FARCE_SCHED_TICK=0 in the environment the process started with turns it
// off: the benchmark's before/after comparison in one run.
var schedTickOn = os.Getenv("FARCE_SCHED_TICK") != "0"

// refresh yields the P once schedTickEvery has passed. Called with no lock
// held (the yield may run another thread's goroutine first).
func (t *schedTick) refresh() {
	if schedTickOn {
		t.refreshAt(nanotime())
	}
}

// refreshAt is refresh with the time (nanotime) already read: a poll hands
// the scheduler's last clock reading, one clock read fewer per poll.
func (t *schedTick) refreshAt(now int64) {
	if !schedTickOn {
		return
	}
	last := t.last.Load()
	if now-last < int64(schedTickEvery) || !t.last.CompareAndSwap(last, now) {
		return
	}
	runtime.Gosched()
}
