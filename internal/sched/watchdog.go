package sched

import (
	"sync/atomic"
	"time"
)

// TurnState is what the loop's thread publishes about its turns (C memory,
// farce_turn_state in farce_core.h, same layout): the loop writes Seq,
// StartedNS, Active and TID with atomic stores, the watchdog writes
// StallSeq. It holds no Ruby value (docs/cgo-hazards.md rule 1).
type TurnState struct {
	Seq       int64 // turns begun so far
	StartedNS int64 // CLOCK_MONOTONIC when the current turn began
	Active    int64 // 1 while a fiber runs, 0 while the loop itself runs or waits in the kernel
	TID       int64 // the loop thread's kernel thread id (the watchdog signals it)
	StallSeq  int64 // the last turn the watchdog reported as a stall
}

// Watchdog notices a turn that has lasted longer than its threshold, once
// per turn: the fiber running it holds the loop. It runs without the GVL
// (a goroutine), so it sees the stall while it happens, even when the
// fiber is inside a C call that holds the GVL.
type Watchdog struct {
	state     *TurnState
	threshold int64 // ns
	reported  int64 // Seq of the last turn reported
}

// NewWatchdog watches state for turns longer than threshold (> 0).
func NewWatchdog(state *TurnState, threshold time.Duration) *Watchdog {
	return &Watchdog{state: state, threshold: int64(threshold), reported: atomic.LoadInt64(&state.StallSeq)}
}

// Check reports whether, at now (CLOCK_MONOTONIC ns), the current turn is a
// stall not reported yet; if so it records it in StallSeq (the loop's side
// then knows the sample it gets belongs to this turn) and returns the
// thread to signal.
func (w *Watchdog) Check(now int64) (tid int64, stalled bool) {
	st := w.state
	if atomic.LoadInt64(&st.Active) == 0 {
		return 0, false
	}
	seq := atomic.LoadInt64(&st.Seq)
	started := atomic.LoadInt64(&st.StartedNS)
	if atomic.LoadInt64(&st.Seq) != seq || atomic.LoadInt64(&st.Active) == 0 {
		return 0, false // a new turn began while we read: look again next tick
	}
	if seq == w.reported || now-started < w.threshold {
		return 0, false
	}
	w.reported = seq
	atomic.StoreInt64(&st.StallSeq, seq)
	return atomic.LoadInt64(&st.TID), true
}

// Interval is how often Run checks: a quarter of the threshold (a stall is
// seen within 1.25 thresholds), between 1 ms and 50 ms.
func (w *Watchdog) Interval() time.Duration {
	d := time.Duration(w.threshold / 4)
	if d < time.Millisecond {
		d = time.Millisecond
	}
	if d > 50*time.Millisecond {
		d = 50 * time.Millisecond
	}
	return d
}

// Run checks every Interval until stop is closed, calling kick with the
// thread of each stall; now is CLOCK_MONOTONIC in ns.
func (w *Watchdog) Run(stop <-chan struct{}, now func() int64, kick func(tid int64)) {
	t := time.NewTicker(w.Interval())
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			if tid, stalled := w.Check(now()); stalled && tid > 0 {
				kick(tid)
			}
		}
	}
}
