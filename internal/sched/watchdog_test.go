package sched

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func beginTurn(st *TurnState, now int64) {
	atomic.StoreInt64(&st.StartedNS, now)
	atomic.AddInt64(&st.Seq, 1)
	atomic.StoreInt64(&st.Active, 1)
}

func TestWatchdogReportsALongTurnOnce(t *testing.T) {
	st := &TurnState{TID: 42}
	w := NewWatchdog(st, 100*time.Millisecond)
	beginTurn(st, 1_000_000_000)
	_, stalled := w.Check(1_000_000_000 + int64(99*time.Millisecond))
	assert.False(t, stalled, "under the threshold")
	tid, stalled := w.Check(1_000_000_000 + int64(100*time.Millisecond))
	assert.True(t, stalled)
	assert.Equal(t, int64(42), tid)
	assert.Equal(t, st.Seq, st.StallSeq)
	_, stalled = w.Check(1_000_000_000 + int64(time.Second))
	assert.False(t, stalled, "one report per turn")

	beginTurn(st, 2_000_000_000)
	_, stalled = w.Check(2_000_000_000 + int64(150*time.Millisecond))
	assert.True(t, stalled, "the next long turn is a new stall")
}

func TestWatchdogIgnoresTheLoopItself(t *testing.T) {
	st := &TurnState{TID: 1}
	w := NewWatchdog(st, time.Millisecond)
	beginTurn(st, 0)
	atomic.StoreInt64(&st.Active, 0) // the fiber yielded; the loop waits in the kernel
	_, stalled := w.Check(int64(time.Hour))
	assert.False(t, stalled)
}

func TestWatchdogManyShortTurnsAreNoStall(t *testing.T) {
	st := &TurnState{TID: 1}
	w := NewWatchdog(st, 10*time.Millisecond)
	now := int64(0)
	for i := 0; i < 1000; i++ {
		beginTurn(st, now)
		now += int64(time.Millisecond)
		_, stalled := w.Check(now)
		require.False(t, stalled, "turn %d", i)
	}
}

func TestWatchdogInterval(t *testing.T) {
	assert.Equal(t, time.Millisecond, NewWatchdog(&TurnState{}, time.Millisecond).Interval())
	assert.Equal(t, 25*time.Millisecond, NewWatchdog(&TurnState{}, 100*time.Millisecond).Interval())
	assert.Equal(t, 50*time.Millisecond, NewWatchdog(&TurnState{}, time.Minute).Interval())
}

func TestWatchdogRunKicksTheLoopThread(t *testing.T) {
	st := &TurnState{TID: 7}
	w := NewWatchdog(st, time.Millisecond)
	var clock atomic.Int64
	beginTurn(st, 0)
	clock.Store(int64(time.Second))
	kicked := make(chan int64, 4)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { w.Run(stop, clock.Load, func(tid int64) { kicked <- tid }); close(done) }()
	select {
	case tid := <-kicked:
		assert.Equal(t, int64(7), tid)
	case <-time.After(10 * time.Second):
		t.Fatal("no kick")
	}
	close(stop)
	<-done
	assert.Len(t, kicked, 0, "kicked once per turn")
}

// FuzzWatchdog drives turns and checks at arbitrary times against a model:
// a stall is reported exactly for active turns at least threshold old, once.
func FuzzWatchdog(f *testing.F) {
	f.Add([]byte{1, 5, 0, 200, 2, 1, 9})
	f.Fuzz(func(t *testing.T, ops []byte) {
		st := &TurnState{TID: 3}
		const threshold = 50
		w := NewWatchdog(st, threshold)
		now := int64(1000)
		reported := map[int64]bool{}
		for _, op := range ops {
			switch op % 4 {
			case 0:
				beginTurn(st, now)
			case 1:
				atomic.StoreInt64(&st.Active, 0)
			case 2:
				now += int64(op)
			case 3:
				_, stalled := w.Check(now)
				want := st.Active == 1 && now-st.StartedNS >= threshold && !reported[st.Seq]
				require.Equal(t, want, stalled)
				if stalled {
					reported[st.Seq] = true
				}
			}
		}
	})
}
