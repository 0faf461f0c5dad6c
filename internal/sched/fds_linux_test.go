//go:build linux

package sched

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/farce-rb/farce/internal/driver"
)

// pipe returns a non-blocking pipe closed at the end of the test.
// pipe returns a non-blocking pipe closed at the end of the test.
func pipe(t testing.TB) (r, w int) {
	t.Helper()
	var p [2]int
	require.NoError(t, unix.Pipe2(p[:], unix.O_NONBLOCK|unix.O_CLOEXEC))
	t.Cleanup(func() {
		unix.Close(p[0])
		unix.Close(p[1])
	})
	return p[0], p[1]
}

func socketpair(t testing.TB) (a, b int) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	t.Cleanup(func() {
		unix.Close(fds[0])
		unix.Close(fds[1])
	})
	return fds[0], fds[1]
}

func TestUnknownProbesPipe(t *testing.T) {
	forBoth(t, func(t *testing.T, persistent bool) {
		h := newHarness(t, persistent)
		r, w := pipe(t)

		// Nothing pending: the probe says no, the wait parks.
		tok := h.waitFD(r, R, -1, KnownNothing)
		require.Len(t, h.drv.arms(), 1)
		require.True(t, h.s.Cancel(tok))

		// Data pending: ready at once, without touching the driver.
		_, err := unix.Write(w, []byte("x"))
		require.NoError(t, err)
		h.drv.resetCalls()
		h.s.ForgetFD(r)
		h.drv.resetCalls()
		assert.Equal(t, R, h.readyFD(r, R|P, KnownNothing))
		assert.Empty(t, h.drv.calls)

		// The write end of an empty pipe is writable.
		assert.Equal(t, W, h.readyFD(w, W, KnownNothing))
		assert.Empty(t, h.drv.calls)
	})
}

func TestUnknownTrustsNotReadySinceLastEdge(t *testing.T) {
	h := newHarness(t, true)
	r, w := pipe(t)
	tok := h.waitFD(r, R, -1, KnownNotReady)
	require.True(t, h.s.Cancel(tok))
	// Data arrives; its edge has not been polled yet. KnownNothing does not probe a
	// direction known empty since the last edge: the edge will come.
	_, err := unix.Write(w, []byte("x"))
	require.NoError(t, err)
	tok = h.waitFD(r, R, -1, KnownNothing)
	h.drv.Script(h.event(r, R))
	assert.Equal(t, []Completion{{tok, int64(R)}}, h.poll())
	// After the edge, KnownNothing probes again and finds the unread byte.
	assert.Equal(t, R, h.readyFD(r, R, KnownNothing))
}

// A zero timeout (IO#wait_readable(0)) is a question about this instant:
// the kernel answers it, not what the scheduler remembers of the edges.
func TestZeroTimeoutAsksTheKernel(t *testing.T) {
	forBoth(t, func(t *testing.T, persistent bool) {
		h := newHarness(t, persistent)
		r, w := pipe(t)
		// Empty: the wait parks for no time (the caller cancels it).
		tok := h.waitFD(r, R, 0, KnownNothing)
		require.True(t, h.s.Cancel(tok))
		// Bytes arrive before any poll: the direction known empty must not
		// answer for them (it did: nil until the loop polled).
		_, err := unix.Write(w, []byte("x"))
		require.NoError(t, err)
		tok, got, err := h.s.WaitFD(r, R, 0, KnownNothing)
		require.NoError(t, err)
		assert.Zero(t, tok)
		assert.Equal(t, R, got)
		h.check()
	})
}

func TestZeroTimeoutIgnoresAStaleEdge(t *testing.T) {
	h := newHarness(t, true)
	r, _ := pipe(t) // empty: what the kernel says
	tok := h.waitFD(r, R, -1, KnownNotReady)
	require.True(t, h.s.Cancel(tok))
	h.drv.Script(h.event(r, R)) // an edge whose bytes were read since
	h.poll()
	tok = h.waitFD(r, R, 0, KnownNothing)
	require.True(t, h.s.Cancel(tok))
	// The edge was dropped, as a read's EAGAIN drops it: a wait with no
	// timeout parks too.
	tok = h.waitFD(r, R, -1, KnownNothing)
	require.True(t, h.s.Cancel(tok))
}

func TestUnknownProbeSeesHangup(t *testing.T) {
	h := newHarness(t, true)
	r, w := pipe(t)
	require.NoError(t, unix.Close(w))
	assert.Equal(t, R|P, h.readyFD(r, R|P, KnownNothing), "hang-up: every asked event is reported")
	assert.Empty(t, h.drv.calls)
}

func TestUnknownProbeError(t *testing.T) {
	h := newHarness(t, true)
	r, w := pipe(t)
	require.NoError(t, unix.Close(r))
	_ = w
	// r is closed (and may not be reused before the probe in this test).
	_, _, err := h.s.WaitFD(r, R, -1, KnownNothing)
	assert.ErrorIs(t, err, unix.EBADF)
	h.check()
	assert.Equal(t, 0, h.s.Stats().PendingWaits)
}

func TestUnknownCachedEdgeSkipsProbe(t *testing.T) {
	h := newHarness(t, true)
	r, _ := pipe(t) // empty: a probe would say not ready
	tok := h.waitFD(r, R, -1, KnownNotReady)
	require.True(t, h.s.Cancel(tok))
	h.drv.Script(h.event(r, R))
	h.poll()
	assert.Equal(t, R, h.readyFD(r, R, KnownNothing), "a pending edge answers without a probe")
}

func TestRealFileNotPollableWithEpoll(t *testing.T) {
	d, err := driver.NewEpoll()
	require.NoError(t, err)
	s := New(d, nil)
	defer s.Close()
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	require.NoError(t, err)
	defer f.Close()
	fd := int(f.Fd())
	tok, got, err := s.WaitFD(fd, R|W, -1, KnownNotReady)
	require.NoError(t, err)
	assert.Zero(t, tok)
	assert.Equal(t, R|W, got)
	require.NoError(t, s.checkInvariants())
}
