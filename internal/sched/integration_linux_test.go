//go:build linux

package sched

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/farce-rb/farce/internal/driver"
)

func realDrivers(t *testing.T, f func(t *testing.T, s *Scheduler)) {
	for _, name := range []string{"epoll", "poll"} {
		t.Run(name, func(t *testing.T) {
			var d driver.Driver
			var err error
			if name == "epoll" {
				d, err = driver.NewEpoll()
			} else {
				d, err = driver.NewPoll()
			}
			require.NoError(t, err)
			s := New(d, nil)
			t.Cleanup(func() { s.Close() })
			f(t, s)
			require.NoError(t, s.checkInvariants())
		})
	}
}

// pollUntil polls (blocking) until n completions arrived or the deadline passed.
func pollUntil(t *testing.T, s *Scheduler, n int, within time.Duration) []Completion {
	t.Helper()
	guard, err := s.Park(within) // bounds every blocking poll
	require.NoError(t, err)
	var got []Completion
	out := make([]Completion, 16)
	for len(got) < n {
		k, err := s.Poll(out, -1, nil)
		if err != unix.EINTR { // EINTR still hands out what was ready
			require.NoError(t, err)
		}
		require.NoError(t, s.checkInvariants())
		for _, c := range out[:k] {
			require.NotEqual(t, guard, c.Token, "timed out waiting for %d completions, got %v", n, got)
			got = append(got, c)
		}
	}
	s.Cancel(guard)
	return got
}

func TestRealWriteCompletesWaiter(t *testing.T) {
	realDrivers(t, func(t *testing.T, s *Scheduler) {
		a, b := socketpair(t)
		tok, got, err := s.WaitFD(a, R, -1, KnownNothing)
		require.NoError(t, err)
		require.NotZero(t, tok, "nothing to read yet: %v", got)

		go func() {
			time.Sleep(10 * time.Millisecond)
			unix.Write(b, []byte("hello"))
		}()
		cs := pollUntil(t, s, 1, 5*time.Second)
		assert.Equal(t, []Completion{{tok, int64(R)}}, cs)

		buf := make([]byte, 16)
		n, err := unix.Read(a, buf)
		require.NoError(t, err)
		assert.Equal(t, "hello", string(buf[:n]))

		// KnownDrained: parks again, and the next write completes it.
		tok, _, err = s.WaitFD(a, R, -1, KnownDrained)
		require.NoError(t, err)
		require.NotZero(t, tok)
		_, err = unix.Write(b, []byte("again"))
		require.NoError(t, err)
		assert.Equal(t, []Completion{{tok, int64(R)}}, pollUntil(t, s, 1, 5*time.Second))
	})
}

func TestRealPipeWritableAndReadable(t *testing.T) {
	realDrivers(t, func(t *testing.T, s *Scheduler) {
		r, w := pipe(t)
		_, got, err := s.WaitFD(w, W, -1, KnownNothing)
		require.NoError(t, err)
		assert.Equal(t, W, got, "an empty pipe is writable at once")

		tok, _, err := s.WaitFD(r, R, time.Minute, KnownNotReady)
		require.NoError(t, err)
		require.NotZero(t, tok)
		_, err = unix.Write(w, []byte{1})
		require.NoError(t, err)
		assert.Equal(t, []Completion{{tok, int64(R)}}, pollUntil(t, s, 1, 5*time.Second))
		assert.Equal(t, 0, s.Stats().Timers)
	})
}

func TestRealHangupCompletesWaiter(t *testing.T) {
	realDrivers(t, func(t *testing.T, s *Scheduler) {
		a, b := socketpair(t)
		tok, _, err := s.WaitFD(a, R, -1, KnownNotReady)
		require.NoError(t, err)
		require.NotZero(t, tok)
		require.NoError(t, unix.Shutdown(b, unix.SHUT_RDWR))
		cs := pollUntil(t, s, 1, 5*time.Second)
		require.Len(t, cs, 1)
		assert.Equal(t, tok, cs[0].Token)
		assert.Equal(t, int64(R), cs[0].Result)
		// Later waits finish at once.
		_, got, err := s.WaitFD(a, R, -1, KnownNotReady)
		require.NoError(t, err)
		assert.Equal(t, R, got)
	})
}

func TestRealWakeUnblocksPoll(t *testing.T) {
	realDrivers(t, func(t *testing.T, s *Scheduler) {
		tok, err := s.Park(-1) // parked forever: Poll would block with no limit
		require.NoError(t, err)
		done := make(chan error, 1)
		start := time.Now()
		go func() {
			out := make([]Completion, 4)
			for {
				// Go's own preemption signal can cut the kernel wait short
				// (EINTR) before the wake came: only the wake may end it
				if _, err := s.Poll(out, -1, nil); err != unix.EINTR {
					done <- err
					return
				}
			}
		}()
		time.Sleep(30 * time.Millisecond)
		require.NoError(t, s.Driver().Wake())
		select {
		case err := <-done:
			require.NoError(t, err)
			assert.GreaterOrEqual(t, time.Since(start), 30*time.Millisecond)
		case <-time.After(5 * time.Second):
			t.Fatal("Wake did not unblock Poll")
		}
		// The scheduler's own Wake (loop thread) then finishes the park.
		assert.True(t, s.Wake(tok))
		assert.Equal(t, []Completion{{tok, ResultWoken}}, pollUntil(t, s, 1, 5*time.Second))
	})
}

func TestRealWakeFDUnblocksPoll(t *testing.T) {
	realDrivers(t, func(t *testing.T, s *Scheduler) {
		_, err := s.Park(-1)
		require.NoError(t, err)
		done := make(chan error, 1)
		go func() {
			_, err := s.Poll(make([]Completion, 4), -1, nil)
			done <- err
		}()
		time.Sleep(20 * time.Millisecond)
		var b [8]byte
		binary.NativeEndian.PutUint64(b[:], 1)
		_, err = unix.Write(s.Driver().WakeFD(), b[:])
		require.NoError(t, err)
		select {
		case err := <-done:
			if err != unix.EINTR {
				require.NoError(t, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a write to WakeFD did not unblock Poll")
		}
		// The wakeup was consumed: a non-blocking poll finds nothing.
		n, err := s.Poll(make([]Completion, 4), 0, nil)
		require.NoError(t, err)
		assert.Zero(t, n)
	})
}

func TestRealTimerBlocksUntilDeadline(t *testing.T) {
	realDrivers(t, func(t *testing.T, s *Scheduler) {
		start := time.Now()
		tok, err := s.Park(30 * time.Millisecond)
		require.NoError(t, err)
		out := make([]Completion, 4)
		var got []Completion
		for len(got) == 0 {
			n, err := s.Poll(out, -1, nil)
			if err != unix.EINTR {
				require.NoError(t, err)
			}
			got = append(got, out[:n]...)
			require.Less(t, time.Since(start), 5*time.Second)
		}
		assert.Equal(t, []Completion{{tok, ResultTimedOut}}, got)
		assert.GreaterOrEqual(t, time.Since(start), 30*time.Millisecond, "not early")
	})
}

func TestRealForgetFDAndReuse(t *testing.T) {
	realDrivers(t, func(t *testing.T, s *Scheduler) {
		r, w := pipe(t)
		tok, _, err := s.WaitFD(r, R, -1, KnownNotReady)
		require.NoError(t, err)
		require.NotZero(t, tok)
		require.NoError(t, s.ForgetFD(r))
		assert.Equal(t, []Completion{{tok, ResultClosed}}, pollUntil(t, s, 1, 5*time.Second))

		// The number gets a new owner: a socket placed on the same descriptor.
		a, b := socketpair(t)
		require.NoError(t, unix.Dup3(a, r, unix.O_CLOEXEC))
		_ = w
		tok, _, err = s.WaitFD(r, R, -1, KnownNotReady)
		require.NoError(t, err)
		require.NotZero(t, tok)
		_, err = unix.Write(b, []byte("z"))
		require.NoError(t, err)
		assert.Equal(t, []Completion{{tok, int64(R)}}, pollUntil(t, s, 1, 5*time.Second))
	})
}

// A registration belongs to the open file it was made for. The number of a
// parked wait is dup2(2)ed over while another reference keeps its old file
// open, so the kernel keeps the old registration (epoll drops one only with
// the file's last reference; an io_uring poll pins its file) and posts the
// old file's events under the old tag. Told of the new file (SetFDFile),
// the scheduler ends the old wait with ResultClosed, arms the new file
// afresh and never hands the old file's events to the new wait.
func TestRealFileChangedBehindTheNumber(t *testing.T) {
	for _, name := range []string{"epoll", "poll", "io_uring"} {
		t.Run(name, func(t *testing.T) {
			d, _, err := driver.Open(name)
			if err != nil {
				t.Skipf("%s: %v", name, err)
			}
			s := New(d, nil)
			t.Cleanup(func() { s.Close() })
			a, aPeer := socketpair(t)
			_, err = s.SetFDFile(a, FileID{Ino: 1})
			require.NoError(t, err)
			old, _, err := s.WaitFD(a, R, -1, KnownNotReady)
			require.NoError(t, err)
			require.NotZero(t, old)
			out := make([]Completion, 16)
			_, err = s.Poll(out, 0, nil) // the registration reaches the kernel
			require.NoError(t, err)

			keep, err := unix.Dup(a) // the old file stays open
			require.NoError(t, err)
			defer unix.Close(keep)
			n, nPeer := socketpair(t)
			require.NoError(t, unix.Dup2(n, a))

			changed, err := s.SetFDFile(a, FileID{Ino: 2})
			require.NoError(t, err)
			require.True(t, changed)
			fresh, _, err := s.WaitFD(a, R, -1, KnownNotReady)
			require.NoError(t, err)
			require.NotZero(t, fresh)
			cs := pollUntil(t, s, 1, 5*time.Second)
			assert.Equal(t, []Completion{{old, ResultClosed}}, cs)

			_, err = unix.Write(aPeer, []byte("old")) // an edge on the old file only
			require.NoError(t, err)
			for i := 0; i < 3; i++ {
				k, err := s.Poll(out, 20*time.Millisecond, nil)
				if err != unix.EINTR { // Go's preemption signal can cut the wait short; what was ready is still counted
					require.NoError(t, err)
				}
				require.Zero(t, k, "the old file's readiness reached the new wait: %v", out[:k])
			}
			_, err = unix.Write(nPeer, []byte("new"))
			require.NoError(t, err)
			cs = pollUntil(t, s, 1, 5*time.Second)
			assert.Equal(t, []Completion{{fresh, int64(R)}}, cs)
			require.NoError(t, s.checkInvariants())
		})
	}
}
