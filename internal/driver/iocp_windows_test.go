//go:build windows

package driver

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Tests of IOCP behaviour beyond the Driver contract: poll cancellation,
// stray packets, shutdown. They run on Windows and under wine.

func newIOCP(t *testing.T) *IOCP {
	d, err := NewIOCP()
	if err != nil {
		skipUnavailable(t, err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

var procPostQueuedCompletionStatus = modkernel32.NewProc("PostQueuedCompletionStatus")

// postRaw posts a packet whose overlapped field is an arbitrary integer,
// which windows.PostQueuedCompletionStatus (typed *Overlapped) cannot.
func postRaw(t *testing.T, d *IOCP, key, overlapped uintptr) {
	r, _, err := procPostQueuedCompletionStatus.Call(uintptr(d.port), 0, key, overlapped)
	require.NotZero(t, r, "PostQueuedCompletionStatus: %v", err)
}

func waitAll(t *testing.T, d *IOCP, dur time.Duration) []Event {
	var all []Event
	buf := make([]Event, 16)
	deadline := time.Now().Add(dur)
	for time.Now().Before(deadline) {
		n, err := d.Wait(buf, 20*time.Millisecond)
		require.NoError(t, err)
		all = append(all, buf[:n]...)
	}
	return all
}

func TestIOCPStrayPackets(t *testing.T) {
	d := newIOCP(t)
	a, b := newStreamPair(t)
	require.NoError(t, d.Arm(a.FD(), 1, Readable))
	live := d.socks[int32(a.FD())].op
	require.NotZero(t, live)

	postRaw(t, d, afdKey, 0xdead_0000_0042) // no such operation
	postRaw(t, d, 77, 0)                    // unknown completion key
	postRaw(t, d, afdKey, uintptr(live))    // forged completion of a live poll
	assert.Empty(t, waitAll(t, d, 100*time.Millisecond))
	assert.Equal(t, 3, d.strays)
	assert.Equal(t, opSubmitted, d.ops.state(live), "a forged packet must not retire the poll")

	b.Write(t, []byte("x")) // the real completion still arrives
	ev, ok := waitFor(t, d, a.FD(), 1, Readable, Readable, 5*time.Second)
	require.True(t, ok)
	assert.Equal(t, uint32(1), ev.Seq)
	postRaw(t, d, afdKey, uintptr(live)) // a duplicate after retirement
	assert.Empty(t, waitAll(t, d, 50*time.Millisecond))
	assert.Equal(t, 4, d.strays)
}

func TestIOCPWidenCancelsAndResubmits(t *testing.T) {
	d := newIOCP(t)
	a, _ := newStreamPair(t)
	require.NoError(t, d.Arm(a.FD(), 1, Readable)) // nothing to read: stays in flight
	first := d.socks[int32(a.FD())].op
	require.NoError(t, d.Arm(a.FD(), 1, Writable)) // needs a wider poll
	ev, ok := waitFor(t, d, a.FD(), 1, Readable|Writable, Writable, 5*time.Second)
	require.True(t, ok, "widened poll never reported writable: %+v", ev)
	assert.Equal(t, opFree, d.ops.state(first), "cancelled poll retired after its packet")
	assert.Zero(t, d.strays)
}

func TestIOCPDisarmInFlight(t *testing.T) {
	d := newIOCP(t)
	a, b := newStreamPair(t)
	require.NoError(t, d.Arm(a.FD(), 1, Readable))
	id := d.socks[int32(a.FD())].op
	require.NoError(t, d.Disarm(a.FD()))
	b.Write(t, []byte("x"))
	assert.Empty(t, waitAll(t, d, 150*time.Millisecond))
	assert.Equal(t, opFree, d.ops.state(id), "cancelled poll reaped and retired")
	assert.Zero(t, d.ops.inFlight())
	assert.Zero(t, d.strays)
}

func TestIOCPLocalClose(t *testing.T) {
	d := newIOCP(t)
	a, _ := newStreamPair(t)
	fd := a.FD()
	require.NoError(t, d.Arm(fd, 4, Readable))
	a.Close(t)
	ev, ok := waitFor(t, d, fd, 4, Readable, Hangup, 5*time.Second)
	require.True(t, ok, "closing a polled socket must wake its waiter: %+v", ev)
	assert.Equal(t, Readable|Writable|Hangup, ev.Events&(Readable|Writable|Hangup))
}

func TestIOCPCloseDrainsPending(t *testing.T) {
	d, err := NewIOCP()
	if err != nil {
		skipUnavailable(t, err)
	}
	for i := 0; i < 8; i++ {
		a, _ := newStreamPair(t)
		require.NoError(t, d.Arm(a.FD(), uint32(i), Readable))
	}
	require.Equal(t, 8, d.ops.inFlight())
	leakedOps.Lock()
	leakedBefore := len(leakedOps.ops)
	leakedOps.Unlock()
	start := time.Now()
	require.NoError(t, d.Close())
	assert.Less(t, time.Since(start), closeDrainTimeout, "Close hit its drain timeout")
	leakedOps.Lock()
	assert.Equal(t, leakedBefore, len(leakedOps.ops), "polls abandoned instead of drained")
	leakedOps.Unlock()
	assert.NoError(t, d.Close(), "second Close")
}

func TestIOCPNotASocket(t *testing.T) {
	d := newIOCP(t)
	err := d.Arm(regularFile(t), 1, Readable)
	assert.ErrorIs(t, err, ErrNotPollable)
	assert.Zero(t, d.ops.inFlight())
}
