package driver

import (
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The conformance suite is written once against the Driver interface and run
// for every driver this system's Open knows (constructors()): epoll and poll
// on Linux, kqueue and poll on the BSDs and macOS, iocp on Windows. The
// per-system files pair_*_test.go provide connected stream pairs and a
// regular file.

func TestConformance(t *testing.T) {
	for name, ctor := range constructors() {
		t.Run(name, func(t *testing.T) { runConformance(t, ctor) })
	}
}

func runConformance(t *testing.T, ctor func() (Driver, error)) {
	open := func(t *testing.T) Driver {
		// Schedulers run their loop on one OS thread (the Ruby thread);
		// io_uring's SINGLE_ISSUER rings depend on it. Goroutines hop, so
		// pin the test's (rebuilds on a hop are tested in uring tests).
		runtime.LockOSThread()
		t.Cleanup(runtime.UnlockOSThread)
		d, err := ctor()
		if err != nil {
			if errors.Is(err, ErrUnavailable) {
				skipUnavailable(t, err)
			}
			require.NoError(t, err)
		}
		t.Cleanup(func() { d.Close() })
		return d
	}
	t.Run("Readable", func(t *testing.T) { testReadable(t, open(t)) })
	t.Run("Writable", func(t *testing.T) { testWritable(t, open(t)) })
	t.Run("Edge", func(t *testing.T) { testEdge(t, open(t)) })
	t.Run("SeqEchoed", func(t *testing.T) { testSeqEchoed(t, open(t)) })
	t.Run("SeqTakeover", func(t *testing.T) { testSeqTakeover(t, open(t)) })
	t.Run("Disarm", func(t *testing.T) { testDisarm(t, open(t)) })
	t.Run("Hangup", func(t *testing.T) { testHangup(t, open(t)) })
	t.Run("RegularFile", func(t *testing.T) { testRegularFile(t, open(t)) })
	t.Run("SmallBuffer", func(t *testing.T) { testSmallBuffer(t, open(t)) })
	t.Run("WakeInterruptsWait", func(t *testing.T) { testWake(t, open(t)) })
	t.Run("WakeBeforeWait", func(t *testing.T) { testWakeBefore(t, open(t)) })
	t.Run("WakeFD", func(t *testing.T) { testWakeFD(t, open(t)) })
	t.Run("Timeouts", func(t *testing.T) { testTimeouts(t, open(t)) })
	t.Run("Close", func(t *testing.T) {
		d, err := ctor()
		if err != nil {
			t.Skip(err)
		}
		assert.NoError(t, d.Close())
	})
}

// waitFor collects events for fd until one has all of want, or the
// deadline passes. One-shot drivers are armed again after each event that
// did not satisfy want, as the scheduler would.
func waitFor(t *testing.T, d Driver, fd int, seq uint32, arm Events, want Events, within time.Duration) (Event, bool) {
	t.Helper()
	buf := make([]Event, 16)
	deadline := time.Now().Add(within)
	var acc Event
	for time.Now().Before(deadline) {
		n, err := d.Wait(buf, 50*time.Millisecond)
		if isEINTR(err) {
			continue
		}
		require.NoError(t, err)
		for _, ev := range buf[:n] {
			if int(ev.FD) != fd {
				continue
			}
			acc.FD, acc.Seq = ev.FD, ev.Seq
			acc.Events |= ev.Events
			if ev.Events&want == want {
				return ev, true
			}
			if !d.Persistent() {
				require.NoError(t, d.Arm(fd, seq, arm))
			}
		}
	}
	return acc, false
}

// quiet asserts that no event for fd arrives during d.
func quiet(t *testing.T, d Driver, fd int, dur time.Duration, what string) {
	t.Helper()
	buf := make([]Event, 16)
	deadline := time.Now().Add(dur)
	for time.Now().Before(deadline) {
		n, err := d.Wait(buf, 20*time.Millisecond)
		if isEINTR(err) {
			continue
		}
		require.NoError(t, err)
		for _, ev := range buf[:n] {
			assert.NotEqual(t, int32(fd), ev.FD, "%s: unexpected event %v", what, ev.Events)
		}
	}
}

func testReadable(t *testing.T, d Driver) {
	a, b := newStreamPair(t)
	require.NoError(t, d.Arm(a.FD(), 7, Readable))
	b.Write(t, []byte("x"))
	ev, ok := waitFor(t, d, a.FD(), 7, Readable, Readable, 5*time.Second)
	require.True(t, ok, "no readable event, got %+v", ev)
	assert.Equal(t, uint32(7), ev.Seq)
	assert.Zero(t, ev.Events&Hangup, "no hang-up on a live connection")
}

func testWritable(t *testing.T, d Driver) {
	a, _ := newStreamPair(t)
	require.NoError(t, d.Arm(a.FD(), 3, Writable))
	ev, ok := waitFor(t, d, a.FD(), 3, Writable, Writable, 5*time.Second)
	require.True(t, ok, "no writable event, got %+v", ev)
	assert.Equal(t, uint32(3), ev.Seq)
}

// testEdge checks the two reporting disciplines: a persistent driver reports
// a new edge without a new Arm and stays quiet while nothing changes; a
// one-shot driver reports once per Arm and reports again, level-style, after
// the next Arm.
func testEdge(t *testing.T, d Driver) {
	a, b := newStreamPair(t)
	fd := a.FD()
	require.NoError(t, d.Arm(fd, 1, Readable))
	b.Write(t, []byte("1"))
	_, ok := waitFor(t, d, fd, 1, Readable, Readable, 5*time.Second)
	require.True(t, ok)
	if d.Persistent() {
		// Persistent drivers watch writability too; let that settle.
		quietOrWritable(t, d, fd)
		b.Write(t, []byte("2")) // a new edge, no new Arm
		_, ok = waitFor(t, d, fd, 1, Readable, Readable, 5*time.Second)
		assert.True(t, ok, "persistent driver missed the second edge")
	} else {
		quiet(t, d, fd, 100*time.Millisecond, "one-shot driver without re-Arm")
		require.NoError(t, d.Arm(fd, 1, Readable)) // data still unread
		_, ok = waitFor(t, d, fd, 1, Readable, Readable, 5*time.Second)
		assert.True(t, ok, "one-shot driver did not report again after re-Arm")
	}
}

// quietOrWritable waits 100ms and asserts that any event for fd carries no
// Readable bit (data was not added, so no read edge may be reported).
func quietOrWritable(t *testing.T, d Driver, fd int) {
	buf := make([]Event, 16)
	deadline := time.Now().Add(100 * time.Millisecond)
	for time.Now().Before(deadline) {
		n, err := d.Wait(buf, 20*time.Millisecond)
		if isEINTR(err) {
			continue
		}
		require.NoError(t, err)
		for _, ev := range buf[:n] {
			if int(ev.FD) == fd {
				assert.Zero(t, ev.Events&Readable, "repeated read edge without new data: %v", ev.Events)
			}
		}
	}
}

func testSeqEchoed(t *testing.T, d Driver) {
	a, _ := newStreamPair(t)
	// The all-ones seq is the epoll driver's marker for its own wakeup
	// descriptor: a user descriptor must still get it back.
	const seq = ^uint32(0)
	require.NoError(t, d.Arm(a.FD(), seq, Writable))
	ev, ok := waitFor(t, d, a.FD(), seq, Writable, Writable, 5*time.Second)
	require.True(t, ok)
	assert.Equal(t, seq, ev.Seq)
}

func testSeqTakeover(t *testing.T, d Driver) {
	a, b := newStreamPair(t)
	require.NoError(t, d.Arm(a.FD(), 10, Readable))
	require.NoError(t, d.Arm(a.FD(), 11, Readable)) // new owner, no Disarm
	b.Write(t, []byte("x"))
	ev, ok := waitFor(t, d, a.FD(), 11, Readable, Readable, 5*time.Second)
	require.True(t, ok)
	assert.Equal(t, uint32(11), ev.Seq)
}

func testDisarm(t *testing.T, d Driver) {
	a, b := newStreamPair(t)
	require.NoError(t, d.Arm(a.FD(), 5, Readable|Writable))
	require.NoError(t, d.Disarm(a.FD()))
	b.Write(t, []byte("x"))
	quiet(t, d, a.FD(), 150*time.Millisecond, "after Disarm")
	assert.NoError(t, d.Disarm(a.FD()), "second Disarm")
	c, _ := newStreamPair(t)
	fd := c.FD()
	c.Close(t)
	assert.NoError(t, d.Disarm(fd), "Disarm of a closed descriptor")
}

func testHangup(t *testing.T, d Driver) {
	a, b := newStreamPair(t)
	require.NoError(t, d.Arm(a.FD(), 9, Readable))
	b.Close(t)
	ev, ok := waitFor(t, d, a.FD(), 9, Readable, Hangup, 5*time.Second)
	require.True(t, ok, "no hang-up, got %+v", ev)
	assert.Equal(t, Readable|Writable|Hangup, ev.Events&(Readable|Writable|Hangup))
	assert.Equal(t, uint32(9), ev.Seq)
}

// testRegularFile: a regular file is either refused with ErrNotPollable or
// reported ready at once; it must never leave a waiter hanging.
func testRegularFile(t *testing.T, d Driver) {
	fd := regularFile(t)
	err := d.Arm(fd, 2, Readable)
	if errors.Is(err, ErrNotPollable) {
		return
	}
	require.NoError(t, err)
	ev, ok := waitFor(t, d, fd, 2, Readable, Readable, 2*time.Second)
	assert.True(t, ok, "regular file armed but never ready: %+v", ev)
}

func testSmallBuffer(t *testing.T, d Driver) {
	const pairs = 5
	want := map[int32]bool{}
	for i := 0; i < pairs; i++ {
		a, _ := newStreamPair(t)
		require.NoError(t, d.Arm(a.FD(), uint32(i), Writable))
		want[int32(a.FD())] = true
	}
	buf := make([]Event, 2)
	deadline := time.Now().Add(5 * time.Second)
	for len(want) > 0 && time.Now().Before(deadline) {
		n, err := d.Wait(buf, 50*time.Millisecond)
		if isEINTR(err) {
			continue
		}
		require.NoError(t, err)
		require.LessOrEqual(t, n, len(buf))
		for _, ev := range buf[:n] {
			if ev.Events&Writable != 0 {
				delete(want, ev.FD)
			}
		}
	}
	assert.Empty(t, want, "descriptors never reported through a 2-slot buffer")
}

func testWake(t *testing.T, d Driver) {
	go func() {
		time.Sleep(50 * time.Millisecond)
		assert.NoError(t, d.Wake())
	}()
	start := time.Now()
	buf := make([]Event, 4)
	for {
		_, err := d.Wait(buf, 10*time.Second)
		if isEINTR(err) {
			continue
		}
		require.NoError(t, err)
		break
	}
	assert.Less(t, time.Since(start), 5*time.Second, "Wake did not interrupt Wait")
}

func testWakeBefore(t *testing.T, d Driver) {
	// Several wakes coalesce into (at least) one return, and are then
	// consumed: the following Wait times out normally.
	for i := 0; i < 3; i++ {
		require.NoError(t, d.Wake())
	}
	buf := make([]Event, 4)
	start := time.Now()
	_, err := d.Wait(buf, 10*time.Second)
	if !isEINTR(err) {
		require.NoError(t, err)
	}
	assert.Less(t, time.Since(start), 5*time.Second)
	for i := 0; i < 3; i++ { // drain whatever stragglers a driver leaves
		d.Wait(buf, 0)
	}
	start = time.Now()
	n, err := d.Wait(buf, 30*time.Millisecond)
	if !isEINTR(err) {
		require.NoError(t, err)
		assert.Zero(t, n)
		assert.GreaterOrEqual(t, time.Since(start), 30*time.Millisecond, "wake not consumed")
	}
}

func testWakeFD(t *testing.T, d Driver) {
	fd := d.WakeFD()
	if fd < 0 {
		t.Skipf("%s has no wake descriptor (WakeFD = %d): Wake is the only way", d.Name(), fd)
	}
	go func() {
		time.Sleep(50 * time.Millisecond)
		assert.NoError(t, writeWakeFD(fd))
	}()
	start := time.Now()
	buf := make([]Event, 4)
	for {
		_, err := d.Wait(buf, 10*time.Second)
		if isEINTR(err) {
			continue
		}
		require.NoError(t, err)
		break
	}
	assert.Less(t, time.Since(start), 5*time.Second, "write to WakeFD did not interrupt Wait")
}

func testTimeouts(t *testing.T, d Driver) {
	buf := make([]Event, 4)
	timed := func(timeout time.Duration) time.Duration {
		for {
			start := time.Now()
			n, err := d.Wait(buf, timeout)
			if isEINTR(err) {
				continue
			}
			require.NoError(t, err)
			require.Zero(t, n)
			return time.Since(start)
		}
	}
	// Sub-millisecond parts round up: never wake before the deadline.
	for _, d := range []time.Duration{1500 * time.Microsecond, 100 * time.Microsecond, 20 * time.Millisecond} {
		assert.GreaterOrEqual(t, timed(d), d, "Wait(%v) returned early", d)
	}
	assert.Less(t, timed(0), time.Second, "Wait(0) blocked")
	assert.Less(t, timed(20*time.Millisecond), 2*time.Second, "Wait(20ms) overslept")
}

func TestOpen(t *testing.T) {
	d, reason, err := Open("auto")
	if err != nil && errors.Is(err, ErrUnavailable) {
		skipUnavailable(t, err)
	}
	require.NoError(t, err)
	defer d.Close()
	_, known := constructors()[d.Name()]
	assert.True(t, known, "auto picked %q", d.Name())
	t.Logf("auto: %s %s", d.Name(), reason)

	_, _, err = Open("no-such-backend")
	assert.ErrorIs(t, err, ErrUnknownBackend)
}

// Choices is the list Ruby shows (Farce.backends): "auto" first, then every
// name Open knows on this system, each once, and nothing Open would refuse
// as unknown.
func TestChoicesNameWhatOpenKnows(t *testing.T) {
	names := strings.Split(Choices(), ", ")
	require.NotEmpty(t, names)
	assert.Equal(t, "auto", names[0])
	known := make([]string, 0, len(constructors()))
	for name := range constructors() {
		known = append(known, name)
	}
	assert.ElementsMatch(t, known, names[1:])
}

func TestProbe(t *testing.T) {
	a, b := newStreamPair(t)
	got, err := Probe(a.FD(), Writable)
	require.NoError(t, err)
	if got == 0 && probeMayBeUnknown {
		t.Skip("Probe reports 'unknown' (0) on this system")
	}
	assert.Equal(t, Writable, got)
	got, err = Probe(a.FD(), Readable)
	require.NoError(t, err)
	assert.Zero(t, got&Readable)
	b.Write(t, []byte("x"))
	deadline := time.Now().Add(2 * time.Second)
	for got&Readable == 0 && time.Now().Before(deadline) {
		got, err = Probe(a.FD(), Readable)
		require.NoError(t, err)
		time.Sleep(time.Millisecond)
	}
	assert.Equal(t, Readable, got)
}
