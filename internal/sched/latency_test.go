package sched

import (
	"math/rand"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLatencyBucketsCoverEveryValueInOrder(t *testing.T) {
	prev := -1
	for _, ns := range []int64{0, 1, 7, 8, 9, 15, 16, 17, 100, 1000, 1 << 20, 1<<20 + 1, 1 << 40, 1 << 62} {
		b := latencyBucket(ns)
		require.GreaterOrEqual(t, b, prev, "ns %d", ns)
		require.Less(t, b, latencyBuckets)
		if ns < 1<<46 {
			assert.GreaterOrEqual(t, latencyUpper(b), ns, "bucket %d holds %d", b, ns)
			assert.LessOrEqual(t, float64(latencyUpper(b)), float64(ns)*1.125+1, "ns %d", ns)
		}
		prev = b
	}
}

func TestLatencyPercentilesWithinABucket(t *testing.T) {
	var h LatencyHistogram
	assert.Equal(t, int64(0), h.Percentile(0.5), "empty")
	r := rand.New(rand.NewSource(1))
	values := make([]int64, 10000)
	for i := range values {
		values[i] = int64(r.ExpFloat64() * float64(50*time.Microsecond))
		h.Record(values[i])
	}
	sort.Slice(values, func(i, j int) bool { return values[i] < values[j] })
	for _, q := range []float64{0.5, 0.9, 0.99} {
		exact := values[int(q*float64(len(values)))-1]
		got := h.Percentile(q)
		assert.InEpsilon(t, float64(exact), float64(got), 0.15, "p%v", q*100)
	}
	assert.Equal(t, values[len(values)-1], h.Max())
	assert.Equal(t, h.Max(), h.Percentile(1))
	assert.Equal(t, uint64(10000), h.Count())
}

// A timer's wake-up latency counts from its due time; a woken wait's from
// the poll that hands it out; fibers not resumed (0) are not counted.
func TestNoteResumedMeasuresFromReadiness(t *testing.T) {
	h := newHarness(t, false)
	h.s.RecordWakeups(true)
	timer := h.park(time.Millisecond)
	woken := h.park(-1)
	dropped := h.park(-1)
	h.clock.Advance(3 * time.Millisecond) // the timer is 2 ms overdue at the poll
	require.True(t, h.s.Wake(woken))
	require.True(t, h.s.Wake(dropped))
	got := h.poll()
	require.Equal(t, []Token{woken, dropped, timer}, tokens(got))
	now := h.clock.Now() // the poll's time
	h.s.NoteResumed([]int64{now + 1000, 0, now + 5000})
	w := h.s.Wakeups()
	assert.Equal(t, uint64(2), w.Count())
	assert.Equal(t, int64(2*time.Millisecond+5000), w.Max())
	assert.LessOrEqual(t, w.Percentile(0.5), int64(1000*1.125))
}

// Off by default: nothing is stamped or recorded until RecordWakeups(true),
// and a wait that finished before then is not counted when it resumes
// (it has no readiness time to count from).
func TestWakeupsOffUntilAsked(t *testing.T) {
	h := newHarness(t, false)
	before := h.park(-1)
	require.True(t, h.s.Wake(before))
	got := h.poll()
	require.Equal(t, []Token{before}, tokens(got))
	h.s.NoteResumed([]int64{h.clock.Now() + 1000})
	assert.Equal(t, uint64(0), h.s.Wakeups().Count(), "off")

	early := h.park(-1)
	require.True(t, h.s.Wake(early)) // finished while off
	h.s.RecordWakeups(true)
	later := h.park(-1)
	require.True(t, h.s.Wake(later))
	got = h.poll()
	require.Equal(t, []Token{early, later}, tokens(got))
	h.s.NoteResumed([]int64{h.clock.Now() + 1000, h.clock.Now() + 2000})
	assert.Equal(t, uint64(1), h.s.Wakeups().Count(), "only the wait that finished once it was on")
	assert.Equal(t, int64(2000), h.s.Wakeups().Max())
}
