//go:build linux

package driver

import (
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// The batching contract (uring_ops_linux.go): an op's SQE waits in the SQ
// for the next Wait, which the caller calls only after checking that every
// op queued since the last one still names the file it was meant for; any
// other way into the kernel withdraws unchecked op SQEs instead of
// submitting them.

// reusedPipe closes old's read end and makes a pipe that gets its number,
// with data waiting in it.
func reusedPipe(t *testing.T, old [2]int, data string) (fresh [2]int) {
	t.Helper()
	require.NoError(t, unix.Close(old[0]))
	require.NoError(t, unix.Pipe2(fresh[:], unix.O_NONBLOCK|unix.O_CLOEXEC))
	t.Cleanup(func() { unix.Close(fresh[0]); unix.Close(fresh[1]) })
	require.Equal(t, old[0], fresh[0], "the new pipe did not get the old number")
	_, err := unix.Write(fresh[1], []byte(data))
	require.NoError(t, err)
	return fresh
}

func readAll(t *testing.T, fd int) string {
	t.Helper()
	got := make([]byte, 64)
	n, err := unix.Read(fd, got)
	require.NoError(t, err)
	return string(got[:n])
}

// A queued op whose descriptor number changed hands before any enter is
// cancelled (what the extension does when its check fails): it never runs. Its
// SQE becomes a NOP, its buffer stays untouched, the new pipe keeps its
// data, and it completes with -ECANCELED at the next Wait.
func TestURingQueuedOpCancelledBeforeAnyEnterNeverRuns(t *testing.T) {
	for _, tier := range []string{"defer", "coop", "plain"} {
		t.Run(tier, func(t *testing.T) {
			u := uringOpsOrSkip(t, tier)
			var old [2]int
			require.NoError(t, unix.Pipe2(old[:], unix.O_NONBLOCK|unix.O_CLOEXEC))
			defer unix.Close(old[1])
			buf := make([]byte, 8)
			require.NoError(t, u.SubmitOp(Op{Kind: OpRead, FD: int32(old[0]), Ptr: uintptr(unsafe.Pointer(&buf[0])), Len: 8, ID: 3<<32 | 4}))
			fresh := reusedPipe(t, old, "fresh")

			require.NoError(t, u.CancelOp(3<<32|4))
			assert.Equal(t, 0, u.OpsInFlight(), "a withdrawn op holds no memory of the kernel's")
			res := waitOps(t, u, 1, 2*time.Second)
			require.Len(t, res, 1)
			assert.Equal(t, OpResult{ID: 3<<32 | 4, Result: -int64(unix.ECANCELED)}, res[0])
			assert.Empty(t, waitOps(t, u, 1, 30*time.Millisecond), "a second completion")
			assert.Equal(t, make([]byte, 8), buf, "the op wrote into its buffer")
			assert.Equal(t, "fresh", readAll(t, fresh[0]), "the new pipe's data")
		})
	}
}

// A cancel of an op the kernel has taken still goes through ASYNC_CANCEL
// (TestURingOpCancel); one of an op queued in the same batch as others
// withdraws only that one.
func TestURingCancelWithdrawsOnlyItsOp(t *testing.T) {
	u := uringOpsOrSkip(t, "defer")
	a, b := newStreamPair(t)
	c, d := newStreamPair(t)
	b.Write(t, []byte("ab"))
	d.Write(t, []byte("cd"))
	buf1, buf2 := make([]byte, 8), make([]byte, 8)
	require.NoError(t, u.SubmitOp(Op{Kind: OpRead, FD: int32(a.FD()), Ptr: uintptr(unsafe.Pointer(&buf1[0])), Len: 8, ID: 1}))
	require.NoError(t, u.SubmitOp(Op{Kind: OpRead, FD: int32(c.FD()), Ptr: uintptr(unsafe.Pointer(&buf2[0])), Len: 8, ID: 2}))
	require.NoError(t, u.CancelOp(1))
	got := waitOps(t, u, 2, 2*time.Second)
	require.Len(t, got, 2)
	assert.ElementsMatch(t, []OpResult{{ID: 1, Result: -int64(unix.ECANCELED)}, {ID: 2, Result: 2}}, got)
	assert.Equal(t, "cd", string(buf2[:2]))
	assert.Equal(t, make([]byte, 8), buf1)
	assert.Equal(t, "ab", readAll(t, a.FD()))
}

// Wait(0) submits queued op SQEs: it may not leave them to the blocking
// Wait the caller makes next, which runs with Ruby's lock released (other
// threads could close the IO and reuse its number first).
func TestURingZeroWaitSubmitsOps(t *testing.T) {
	for _, tier := range []string{"defer", "coop", "plain"} {
		t.Run(tier, func(t *testing.T) {
			u := uringOpsOrSkip(t, tier)
			a, b := newStreamPair(t)
			buf := make([]byte, 8)
			require.NoError(t, u.SubmitOp(Op{Kind: OpRead, FD: int32(a.FD()), Ptr: uintptr(unsafe.Pointer(&buf[0])), Len: 8, ID: 6}))
			assert.False(t, u.ops[6].submitted(u.ring), "SubmitOp entered the ring")
			_, err := u.Wait(make([]Event, 4), 0)
			require.NoError(t, err)
			assert.True(t, u.ops[6].submitted(u.ring), "Wait(0) left the op queued")
			b.Write(t, []byte("x"))
			got := waitOps(t, u, 1, 2*time.Second)
			require.Len(t, got, 1)
			assert.Equal(t, OpResult{ID: 6, Result: 1}, got[0])
		})
	}
}

// sqeNops queues NOP SQEs until the next getSQE would find the SQ full.
func sqeNops(t *testing.T, u *URing) {
	t.Helper()
	for u.ring.sqSpace() > 0 {
		s, err := u.sqe()
		require.NoError(t, err)
		*s = uringSQE{Opcode: uringOpNop, UserData: makeUD(udNop, 0, 0)}
	}
}

// A full SQ is flushed by the next sqe() (an Arm, a cancel): that enter
// comes before the caller checked the queued ops, so it withdraws them
// instead (-EAGAIN: the caller waits for readiness and reads plainly).
// Data already waiting shows whether the op ran.
func TestURingFullSQFlushWithdrawsQueuedOps(t *testing.T) {
	u := uringOpsOrSkip(t, "defer")
	a, b := newStreamPair(t)
	b.Write(t, []byte("kept"))
	buf := make([]byte, 8)
	require.NoError(t, u.SubmitOp(Op{Kind: OpRead, FD: int32(a.FD()), Ptr: uintptr(unsafe.Pointer(&buf[0])), Len: 8, ID: 8}))
	sqeNops(t, u)
	c, _ := newStreamPair(t)
	require.NoError(t, u.Arm(c.FD(), 1, Readable)) // needs an SQE: flushes the full SQ
	assert.Equal(t, 0, u.OpsInFlight())
	got := waitOps(t, u, 1, 2*time.Second)
	require.Len(t, got, 1)
	assert.Equal(t, OpResult{ID: 8, Result: -int64(unix.EAGAIN)}, got[0])
	assert.Equal(t, make([]byte, 8), buf, "the op read")
	assert.Equal(t, "kept", readAll(t, a.FD()))

	// an op queued after the flush is submitted by the next Wait as usual
	require.NoError(t, u.SubmitOp(Op{Kind: OpRead, FD: int32(a.FD()), Ptr: uintptr(unsafe.Pointer(&buf[0])), Len: 8, ID: 9}))
	b.Write(t, []byte("next"))
	got = waitOps(t, u, 1, 2*time.Second)
	require.Len(t, got, 1)
	assert.Equal(t, OpResult{ID: 9, Result: 4}, got[0])
}

// DrainOps (closing) withdraws a queued op instead of submitting it: its
// enter runs with Ruby's lock released, long after the op was checked.
func TestURingDrainWithdrawsQueuedOps(t *testing.T) {
	u := uringOpsOrSkip(t, "defer")
	a, b := newStreamPair(t)
	b.Write(t, []byte("kept"))
	buf := make([]byte, 8)
	require.NoError(t, u.SubmitOp(Op{Kind: OpRead, FD: int32(a.FD()), Ptr: uintptr(unsafe.Pointer(&buf[0])), Len: 8, ID: 2}))
	left, err := u.DrainOps(time.Second)
	require.NoError(t, err)
	assert.Zero(t, left)
	assert.Equal(t, []OpResult{{ID: 2, Result: -int64(unix.ECANCELED)}}, u.Completions())
	assert.Equal(t, make([]byte, 8), buf, "the op read")
	assert.Equal(t, "kept", readAll(t, a.FD()))
}
