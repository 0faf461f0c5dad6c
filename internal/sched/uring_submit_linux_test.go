//go:build linux

package sched

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/farce-rb/farce/internal/driver"
)

// A poll that hands out ready work (here a yield) must still submit the
// descriptor waits armed since the last poll, and report what the kernel
// has ready for them in that same poll: io-event's select(1) after two
// fibers waited on one socket (one writable at once, one readable once the
// peer wrote) resumes both (its selector.rb:194). io_uring's driver bets
// that an empty Wait(0) is followed by a blocking Wait and leaves the
// submission to it; its caller runs the yield first instead, so the read
// wait stayed unsubmitted for a whole iteration.
func TestURingPollWithReadyWorkSubmitsWaitsArmedSinceTheLastPoll(t *testing.T) {
	runtime.LockOSThread() // SINGLE_ISSUER rings: stay on the creating thread
	t.Cleanup(runtime.UnlockOSThread)
	d, err := driver.NewURing()
	if err != nil {
		t.Skipf("io_uring unavailable: %v", err)
	}
	s := New(d, nil)
	t.Cleanup(func() { s.Close() })
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK, 0)
	require.NoError(t, err)
	t.Cleanup(func() { unix.Close(fds[0]); unix.Close(fds[1]) })

	out := make([]Completion, 8)
	for round := 0; round < 3; round++ { // the driver's "never twice in a row" must not hide it
		read, ready, err := s.WaitFD(fds[0], R, -1, KnownNothing)
		require.NoError(t, err)
		require.NotZero(t, read, "nothing to read yet: %v", ready)
		y, err := s.Yield()
		require.NoError(t, err)
		_, err = unix.Write(fds[1], []byte("x"))
		require.NoError(t, err)

		n, err := s.Poll(out, -1, nil)
		require.NoError(t, err)
		assert.ElementsMatch(t, []Completion{{y, ResultWoken}, {read, int64(R)}}, out[:n], "round %d", round)
		buf := make([]byte, 8)
		_, err = unix.Read(fds[0], buf)
		require.NoError(t, err)
		require.NoError(t, s.checkInvariants())
	}
}
