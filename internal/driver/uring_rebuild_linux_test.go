//go:build linux

package driver

import (
	"errors"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// onOtherThread runs f on a goroutine locked to a thread of its own (not
// the test's, which created the ring) and waits for it.
func onOtherThread(f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		f()
	}()
	<-done
}

// submitRead queues a read op into buf and makes sure the kernel took it
// (a Wait that enters the ring).
func submitRead(t *testing.T, u *URing, fd int, buf []byte, id uint64) {
	t.Helper()
	require.NoError(t, u.SubmitOp(Op{Kind: OpRead, FD: int32(fd), Ptr: uintptr(unsafe.Pointer(&buf[0])), Len: uint32(len(buf)), ID: id}))
	assert.Empty(t, waitOps(t, u, 1, 30*time.Millisecond), "nothing to read yet")
	require.True(t, u.ops[uint32(id)].submitted(u.ring), "the kernel has not taken the op")
}

// Issue 13 item 6: a ring entered from another thread (EEXIST under
// SINGLE_ISSUER) used to be rebuilt with every op in flight queued again,
// although the old ring had submitted them: two reads into one buffer, the
// old one's bytes lost with its ring. Now the driver refuses
// (ErrForeignThread) and the ops stay with the thread that can reap them.
func TestURingRebuildKeepsSubmittedOps(t *testing.T) {
	u := uringOpsOrSkip(t, "defer")
	if u.info.setup&uringSetupSingleIssuer == 0 {
		t.Skip("no SINGLE_ISSUER here")
	}
	a, b := newStreamPair(t)
	buf := make([]byte, 8)
	submitRead(t, u, a.FD(), buf, 5)

	var waitErr error
	onOtherThread(func() {
		b.Write(t, []byte("x"))
		_, waitErr = u.Wait(make([]Event, 4), 20*time.Millisecond)
	})
	assert.ErrorIs(t, waitErr, ErrForeignThread)
	assert.ErrorIs(t, waitErr, unix.EEXIST)
	assert.Equal(t, 0, u.rebuilt, "rebuilt a ring whose ops were in flight")

	got := waitOps(t, u, 1, 2*time.Second) // the creator thread reaps it
	require.Len(t, got, 1, "the read's completion was lost")
	assert.Equal(t, OpResult{ID: 5, Result: 1}, got[0])
	assert.Equal(t, "x", string(buf[:1]))
	assert.Equal(t, 0, u.OpsInFlight())
	var rest [4]byte
	_, err := unix.Read(a.FD(), rest[:])
	assert.Equal(t, unix.EAGAIN, err, "a second read was started")
}

// An op queued on the creator's thread and not submitted yet when another
// thread enters the ring: the enter rebuilds the ring there, and the op is
// withdrawn (-EAGAIN) rather than queued again on the new ring, whose next
// enter would submit it after its descriptor was last checked (the caller
// waits for readiness instead). Ops queued on the new ring run as usual.
func TestURingRebuildWithdrawsUnsubmittedOps(t *testing.T) {
	u := uringOpsOrSkip(t, "defer")
	if u.info.setup&uringSetupSingleIssuer == 0 {
		t.Skip("no SINGLE_ISSUER here")
	}
	a, b := newStreamPair(t)
	buf := make([]byte, 8)
	require.NoError(t, u.SubmitOp(Op{Kind: OpRead, FD: int32(a.FD()), Ptr: uintptr(unsafe.Pointer(&buf[0])), Len: 8, ID: 9}))
	var withdrawn, after []OpResult
	var rebuilt int
	onOtherThread(func() {
		b.Write(t, []byte("yz"))
		withdrawn = waitOps(t, u, 1, 2*time.Second)
		rebuilt = u.rebuilt
		require.NoError(t, u.SubmitOp(Op{Kind: OpRead, FD: int32(a.FD()), Ptr: uintptr(unsafe.Pointer(&buf[0])), Len: 8, ID: 10}))
		after = waitOps(t, u, 1, 2*time.Second)
		u.Close() // on the thread that now owns the ring
	})
	assert.Equal(t, 1, rebuilt)
	require.Len(t, withdrawn, 1)
	assert.Equal(t, OpResult{ID: 9, Result: -int64(unix.EAGAIN)}, withdrawn[0])
	require.Len(t, after, 1)
	assert.Equal(t, OpResult{ID: 10, Result: 2}, after[0], "the op on the rebuilt ring")
	assert.Equal(t, "yz", string(buf[:2]))
}

// An op queued from another thread while the creator's ops are in flight:
// the ring cannot be rebuilt there, so the Wait that would submit it fails
// (ErrForeignThread), and the op is withdrawn (its SQE becomes a NOP,
// -EAGAIN) instead of being left queued for a later enter, by when its
// descriptor number may have changed hands.
func TestURingOpRefusedOnAForeignThreadIsWithdrawn(t *testing.T) {
	u := uringOpsOrSkip(t, "defer")
	if u.info.setup&uringSetupSingleIssuer == 0 {
		t.Skip("no SINGLE_ISSUER here")
	}
	a, b := newStreamPair(t)
	c, d := newStreamPair(t)
	buf, other := make([]byte, 8), make([]byte, 8)
	submitRead(t, u, a.FD(), buf, 5)

	var submitErr, waitErr error
	onOtherThread(func() {
		submitErr = u.SubmitOp(Op{Kind: OpRead, FD: int32(c.FD()), Ptr: uintptr(unsafe.Pointer(&other[0])), Len: 8, ID: 6})
		_, waitErr = u.Wait(make([]Event, 4), 0)
	})
	require.NoError(t, submitErr)
	assert.ErrorIs(t, waitErr, ErrForeignThread)
	assert.Equal(t, 1, u.OpsInFlight(), "a withdrawn op is not in flight")

	d.Write(t, []byte("kept"))
	b.Write(t, []byte("x"))
	got := waitOps(t, u, 2, 2*time.Second) // this enter submits the NOP
	require.Len(t, got, 2)
	assert.ElementsMatch(t, []OpResult{{ID: 5, Result: 1}, {ID: 6, Result: -int64(unix.EAGAIN)}}, got)
	assert.Empty(t, waitOps(t, u, 1, 30*time.Millisecond), "a second completion")
	n, err := unix.Read(c.FD(), other)
	require.NoError(t, err)
	assert.Equal(t, "kept", string(other[:n]), "the withdrawn op read the data")
}

// Issue 13 item 4 (Go side): DrainOps cancels and waits for every op, with
// no time limit unless asked, and refuses on a thread that cannot reap.
func TestURingDrainOps(t *testing.T) {
	u := uringOpsOrSkip(t, "defer")
	a, _ := newStreamPair(t)
	c, _ := newStreamPair(t)
	buf1, buf2 := make([]byte, 8), make([]byte, 8)
	submitRead(t, u, a.FD(), buf1, 1)
	submitRead(t, u, c.FD(), buf2, 2)

	if u.info.setup&uringSetupSingleIssuer != 0 {
		var left int
		var err error
		onOtherThread(func() { left, err = u.DrainOps(-1) })
		assert.ErrorIs(t, err, ErrForeignThread)
		assert.Equal(t, 2, left)
	}

	left, err := u.DrainOps(-1)
	require.NoError(t, err)
	assert.Equal(t, 0, left)
	assert.Equal(t, 0, u.OpsInFlight())
	res := u.Completions()
	require.Len(t, res, 2)
	for _, r := range res {
		assert.Equal(t, -int64(unix.ECANCELED), r.Result, "%+v", r)
	}
	left, err = u.DrainOps(0)
	assert.NoError(t, err)
	assert.Zero(t, left)
	assert.False(t, errors.Is(err, ErrForeignThread))
}

// Issue 13 item 10: a descriptor number beyond MaxFD is refused before the
// per-descriptor table grows (2^30 used to be accepted: a 12 GB table).
func TestURingRefusesHugeDescriptors(t *testing.T) {
	u := uringOpsOrSkip(t, "defer")
	for _, fd := range []int{MaxFD, 1 << 30, 1<<31 - 1, -1} {
		assert.Error(t, u.Arm(fd, 1, Readable), "fd %d", fd)
	}
	assert.Less(t, len(u.fds), 1<<20, "the table grew for a refused descriptor")
	b := make([]byte, 1)
	assert.Error(t, u.SubmitOp(Op{Kind: OpRead, FD: MaxFD, Ptr: uintptr(unsafe.Pointer(&b[0])), Len: 1, ID: 1}))
	assert.Equal(t, 0, u.OpsInFlight())
}
