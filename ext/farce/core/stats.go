// Stats translation: a core's counters and wake-up latency histogram
// written into the C array of farce_stats, indexed by FARCE_STAT_*.

package main

/*
#include "farce_core.h"
*/
import "C"

import "runtime"

// fillStats writes c's counters into v (at least FARCE_STAT_COUNT long),
// taking c.mu for each of its two readings.
func (c *core) fillStats(v []int64) {
	c.mu.Lock()
	st := c.s.Stats()
	c.mu.Unlock()
	v[C.FARCE_STAT_PENDING_WAITS] = int64(st.PendingWaits)
	v[C.FARCE_STAT_READY_WAITS] = int64(st.ReadyWaits)
	v[C.FARCE_STAT_TIMERS] = int64(st.Timers)
	v[C.FARCE_STAT_REGISTERED_FDS] = int64(st.RegisteredFDs)
	v[C.FARCE_STAT_ITERATIONS] = int64(st.Iterations)
	v[C.FARCE_STAT_COMPLETED] = int64(st.Completed)
	v[C.FARCE_STAT_GOROUTINES] = int64(runtime.NumGoroutine())
	v[C.FARCE_STAT_KERNEL_CALLS] = int64(st.KernelCalls)
	v[C.FARCE_STAT_URING_ENTERS] = int64(st.URingEnters)
	c.mu.Lock()
	w := c.s.Wakeups()
	v[C.FARCE_STAT_WAKEUPS] = int64(w.Count())
	v[C.FARCE_STAT_WAKEUP_P50_NS] = w.Percentile(0.50)
	v[C.FARCE_STAT_WAKEUP_P90_NS] = w.Percentile(0.90)
	v[C.FARCE_STAT_WAKEUP_P99_NS] = w.Percentile(0.99)
	v[C.FARCE_STAT_WAKEUP_MAX_NS] = w.Max()
	c.mu.Unlock()
}
