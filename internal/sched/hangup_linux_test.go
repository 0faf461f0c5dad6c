//go:build linux

package sched

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// udpRefused returns a UDP socket connected to a local port nobody
// listens on: a datagram sent on it draws ICMP port-unreachable, which the
// kernel reports as a socket error (EPOLLERR/POLLERR) until read.
func udpRefused(t *testing.T) int {
	t.Helper()
	closed, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK, 0)
	require.NoError(t, err)
	require.NoError(t, unix.Bind(closed, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}))
	sa, err := unix.Getsockname(closed)
	require.NoError(t, err)
	unix.Close(closed)
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK, 0)
	require.NoError(t, err)
	t.Cleanup(func() { unix.Close(fd) })
	require.NoError(t, unix.Connect(fd, sa))
	return fd
}

// Issue 13 item 8: an error report is a hint. After the error was read,
// a new wait must park again (it used to finish at once forever: a fiber
// waiting for readability spun).
func TestHangupIsNotSticky(t *testing.T) {
	realDrivers(t, func(t *testing.T, s *Scheduler) {
		fd := udpRefused(t)
		tok, got, err := s.WaitFD(fd, R, -1, KnownNothing)
		require.NoError(t, err)
		require.NotZero(t, tok, "nothing to read yet: %v", got)
		_, err = unix.Write(fd, []byte("ping"))
		require.NoError(t, err)
		cs := pollUntil(t, s, 1, 5*time.Second)
		require.Len(t, cs, 1)
		assert.Equal(t, tok, cs[0].Token)
		var b [16]byte
		_, err = unix.Read(fd, b[:])
		require.Equal(t, unix.ECONNREFUSED, err, "the ICMP error was not reported")

		tok, got, err = s.WaitFD(fd, R, 100*time.Millisecond, KnownNotReady)
		require.NoError(t, err)
		require.NotZero(t, tok, "a wait after the consumed error finished at once with %v", got)
		cs = pollUntil(t, s, 1, 5*time.Second)
		assert.Equal(t, []Completion{{tok, ResultTimedOut}}, cs, "the wait should have timed out")

		// still watched: a later error edge wakes a new waiter
		tok, _, err = s.WaitFD(fd, R, -1, KnownNotReady)
		require.NoError(t, err)
		require.NotZero(t, tok)
		_, err = unix.Write(fd, []byte("again"))
		require.NoError(t, err)
		cs = pollUntil(t, s, 1, 5*time.Second)
		require.Len(t, cs, 1)
		assert.Equal(t, tok, cs[0].Token)
	})
}

// A hang-up that persists (the peer of a pipe closed) still finishes every
// wait at once.
func TestLastingHangupFinishesWaitsAtOnce(t *testing.T) {
	realDrivers(t, func(t *testing.T, s *Scheduler) {
		var p [2]int
		require.NoError(t, unix.Pipe2(p[:], unix.O_NONBLOCK|unix.O_CLOEXEC))
		defer unix.Close(p[0])
		tok, _, err := s.WaitFD(p[0], R, -1, KnownNothing)
		require.NoError(t, err)
		require.NotZero(t, tok)
		unix.Close(p[1])
		cs := pollUntil(t, s, 1, 5*time.Second)
		require.Len(t, cs, 1)
		for i := 0; i < 3; i++ {
			tok, got, err := s.WaitFD(p[0], R, -1, KnownNotReady)
			require.NoError(t, err)
			assert.Zero(t, tok)
			assert.Equal(t, R, got)
		}
	})
}
