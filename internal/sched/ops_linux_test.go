//go:build linux

package sched

import (
	"os"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/farce-rb/farce/internal/driver"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func opsScheduler(t *testing.T) *Scheduler {
	t.Setenv("FARCE_IO_URING_OPS", "1")
	runtime.LockOSThread() // SINGLE_ISSUER rings: stay on the creating thread
	t.Cleanup(runtime.UnlockOSThread)
	d, err := driver.NewURing()
	if err != nil {
		t.Skipf("io_uring unavailable: %v", err)
	}
	s := New(d, nil)
	t.Cleanup(func() { s.Close() })
	if !s.SupportsOps() {
		t.Skip("no completion operations on this kernel")
	}
	return s
}

// opsPoll polls until n completions arrived (n == 0: a few polls) or
// within passed.
func opsPoll(t *testing.T, s *Scheduler, n int, within time.Duration) []Completion {
	t.Helper()
	var got []Completion
	out := make([]Completion, 8)
	deadline := time.Now().Add(within)
	for i := 0; (len(got) < n || (n == 0 && i < 5)) && time.Now().Before(deadline); i++ {
		k, err := s.Poll(out, 0, nil)
		if err != nil && err != unix.EINTR {
			require.NoError(t, err)
		}
		got = append(got, out[:k]...)
		time.Sleep(time.Millisecond)
	}
	return got
}

func TestOpsLifecycle(t *testing.T) {
	s := opsScheduler(t)
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK, 0)
	require.NoError(t, err)
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	buf := make([]byte, 8)
	p := uintptr(unsafe.Pointer(&buf[0]))

	// submitted -> reaped -> released
	tok, err := s.SubmitOp(driver.OpRead, fds[0], p, 8, 0)
	require.NoError(t, err)
	assert.Equal(t, 1, s.Stats().RegisteredFDs)
	unix.Write(fds[1], []byte("abc"))
	got := opsPoll(t, s, 1, 2*time.Second)
	require.Len(t, got, 1)
	assert.Equal(t, Completion{Token: tok, Result: 3}, got[0])
	assert.False(t, s.CancelOp(tok), "already reaped")
	require.NoError(t, s.checkInvariants())

	// submitted -> cancelling -> reaped (-ECANCELED)
	tok, err = s.SubmitOp(driver.OpRead, fds[0], p, 8, 0)
	require.NoError(t, err)
	opsPoll(t, s, 0, 2*time.Second)
	assert.True(t, s.CancelOp(tok))
	assert.True(t, s.CancelOp(tok), "still in flight until reaped")
	got = opsPoll(t, s, 1, 2*time.Second)
	require.Len(t, got, 1)
	assert.Equal(t, Completion{Token: tok, Result: -int64(unix.ECANCELED)}, got[0])

	// Cancel (abandon) keeps the slot until the completion, which is dropped
	tok, err = s.SubmitOp(driver.OpRead, fds[0], p, 8, 0)
	require.NoError(t, err)
	assert.True(t, s.Cancel(tok))
	assert.Empty(t, opsPoll(t, s, 1, 200*time.Millisecond))
	require.NoError(t, s.checkInvariants())
	assert.Equal(t, 0, s.Stats().PendingWaits)

	// ForgetFD (the descriptor was closed) cancels its operations
	tok, err = s.SubmitOp(driver.OpRead, fds[0], p, 8, 0)
	require.NoError(t, err)
	require.NoError(t, s.ForgetFD(fds[0]))
	got = opsPoll(t, s, 1, 2*time.Second)
	require.Len(t, got, 1)
	assert.Equal(t, Completion{Token: tok, Result: -int64(unix.ECANCELED)}, got[0])
	opsPoll(t, s, 0, 2*time.Second)
	assert.Equal(t, 0, s.Stats().RegisteredFDs)
	require.NoError(t, s.checkInvariants())
}

// Issue 13 item 4: DrainOps ends every operation in flight (cancelled)
// before it returns 0, so that the extension may release their memory; the
// completions still reach their waits.
func TestDrainOpsBeforeRelease(t *testing.T) {
	s := opsScheduler(t)
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK, 0)
	require.NoError(t, err)
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	buf := make([]byte, 8)
	tok, err := s.SubmitOp(driver.OpRead, fds[0], uintptr(unsafe.Pointer(&buf[0])), 8, -1)
	require.NoError(t, err)
	assert.Empty(t, opsPoll(t, s, 0, time.Second), "nothing to read yet")
	assert.Equal(t, 1, s.OpsInFlight())

	left, err := s.DrainOps(-1)
	require.NoError(t, err)
	assert.Equal(t, 0, left)
	assert.Equal(t, 0, s.OpsInFlight())
	got := opsPoll(t, s, 1, time.Second)
	assert.Equal(t, []Completion{{tok, -int64(unix.ECANCELED)}}, got)
	require.NoError(t, s.checkInvariants())
	// the socket was not read behind our back
	unix.Write(fds[1], []byte("k"))
	n, err := unix.Read(fds[0], buf)
	require.NoError(t, err)
	assert.Equal(t, "k", string(buf[:n]))
}

// driver.OpAsync or'ed into a kind reaches the driver as Op.Async (a
// regular file's read at its position, by the kernel's workers); alone it
// names no operation.
func TestSubmitOpAsyncOnARegularFile(t *testing.T) {
	s := opsScheduler(t)
	path := t.TempDir() + "/f"
	require.NoError(t, os.WriteFile(path, []byte("file bytes"), 0o600))
	fd, err := unix.Open(path, unix.O_RDONLY, 0)
	require.NoError(t, err)
	defer unix.Close(fd)
	buf := make([]byte, 16)
	p := uintptr(unsafe.Pointer(&buf[0]))
	_, err = s.SubmitOp(driver.OpAsync, fd, p, 4, -1)
	assert.Error(t, err, "OpAsync alone is no operation")
	tok, err := s.SubmitOp(driver.OpRead|driver.OpAsync, fd, p, 4, -1)
	require.NoError(t, err)
	assert.Equal(t, []Completion{{tok, 4}}, opsPoll(t, s, 1, 5*time.Second))
	assert.Equal(t, "file", string(buf[:4]))
	require.NoError(t, s.checkInvariants())
}
