package sched

import "math/bits"

// Wake-up latency: from a wait becoming ready to its fiber running. Ready
// is a timer's due time, or else the poll that handed the wait to the loop
// (for a descriptor, the poll that saw it ready; for a wake or a yield from
// a running fiber, the next poll: the time until then is not counted). One
// clock reading per poll, none per wait (a reading per wake cost 3% of a
// Queue hand-off). The extension stamps when it resumed each fiber of a
// batch and hands the stamps to the next poll (NoteResumed). All of it
// happens only while RecordWakeups is on, which the extension turns on at
// the first stats call: a loop whose stats nobody reads pays nothing (the
// stamps and the histogram cost 2-3% of a Queue hand-off).

// latencyBuckets: eight buckets per power of two of nanoseconds (at most
// 12.5% too high), up to 2^47 ns (39 hours); beyond goes in the last one.
const (
	latencySubBits = 3
	latencyBuckets = 48 << latencySubBits
)

// LatencyHistogram counts durations in log-linear buckets: constant memory,
// constant time per record, percentiles within 12.5%.
type LatencyHistogram struct {
	counts [latencyBuckets]uint64
	total  uint64
	max    int64
}

func latencyBucket(ns int64) int {
	if ns < 1<<latencySubBits {
		if ns < 0 {
			return 0
		}
		return int(ns)
	}
	e := bits.Len64(uint64(ns)) // ns has e significant bits, e > latencySubBits
	sub := int(uint64(ns)>>(e-1-latencySubBits)) & (1<<latencySubBits - 1)
	b := (e-latencySubBits)<<latencySubBits + sub
	if b >= latencyBuckets {
		return latencyBuckets - 1
	}
	return b
}

// latencyUpper is the largest duration bucket b holds.
func latencyUpper(b int) int64 {
	if b < 1<<latencySubBits {
		return int64(b)
	}
	e := b>>latencySubBits + latencySubBits // significant bits
	sub := int64(b & (1<<latencySubBits - 1))
	lo := (1<<latencySubBits | sub) << (e - 1 - latencySubBits)
	return lo + 1<<(e-1-latencySubBits) - 1
}

// Record adds one duration in nanoseconds (negative counts as 0).
func (h *LatencyHistogram) Record(ns int64) {
	if ns < 0 {
		ns = 0
	}
	h.counts[latencyBucket(ns)]++
	h.total++
	if ns > h.max {
		h.max = ns
	}
}

// Count is how many durations were recorded.
func (h *LatencyHistogram) Count() uint64 { return h.total }

// Max is the longest duration recorded, exactly.
func (h *LatencyHistogram) Max() int64 { return h.max }

// Percentile is the duration (ns) that q (0..1) of the records do not
// exceed, as its bucket's upper bound (never more than Max); 0 when empty.
func (h *LatencyHistogram) Percentile(q float64) int64 {
	if h.total == 0 {
		return 0
	}
	want := uint64(q*float64(h.total) + 0.5)
	if want < 1 {
		want = 1
	}
	if want > h.total {
		want = h.total
	}
	var seen uint64
	for b, c := range h.counts {
		seen += c
		if seen >= want {
			if u := latencyUpper(b); u < h.max {
				return u
			}
			return h.max
		}
	}
	return h.max
}

// NoteResumed takes when (CLOCK_MONOTONIC ns, the clock the scheduler
// runs on in the extension) the fibers of the last batch resumed, in the
// batch's order; 0 for one that was not (cancelled meanwhile, or the batch
// cut short). Call it before the next poll.
func (s *Scheduler) NoteResumed(at []int64) {
	for k, i := range s.delivered {
		if k >= len(at) {
			break
		}
		if ready := s.slots.slots[i].readyAt; at[k] > 0 && ready > 0 { // 0: finished before recording began
			s.wakeups.Record(at[k] - ready)
		}
	}
}

// stampReady gives the waits finished since the last stamp, and not stamped
// with a due time, the time now.
func (s *Scheduler) stampReady(now int64) {
	for _, i := range s.unstamped {
		if sl := &s.slots.slots[i]; sl.readyAt == 0 {
			sl.readyAt = now
		}
	}
	s.unstamped = s.unstamped[:0]
}

// RecordWakeups turns the wake-up latency histogram on or off. Off (the
// default), no wait is stamped and nothing is recorded: a loop whose
// histogram nobody reads pays nothing for it.
// Every poll says which (farce_poll_batch): the unchanged case is inlined.
func (s *Scheduler) RecordWakeups(on bool) {
	if on != s.latency {
		s.recordWakeups(on)
	}
}

func (s *Scheduler) recordWakeups(on bool) {
	if !on && s.latency {
		for _, i := range s.unstamped {
			s.slots.slots[i].readyAt = 0
		}
		s.unstamped = s.unstamped[:0]
	}
	s.latency = on
}

// Wakeups is the wake-up latency histogram.
func (s *Scheduler) Wakeups() *LatencyHistogram { return &s.wakeups }
