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

func uringOpsOrSkip(t *testing.T, want string) *URing {
	u := uringOrSkip(t, want, false)
	if !u.info.ops {
		t.Skip("this kernel lacks IORING_OP_READ/WRITE/ASYNC_CANCEL or FAST_POLL")
	}
	u.opsOn = true
	return u
}

// waitOps runs Wait until n op results arrived or the deadline passed.
func waitOps(t *testing.T, u *URing, n int, within time.Duration) []OpResult {
	t.Helper()
	var got []OpResult
	buf := make([]Event, 8)
	deadline := time.Now().Add(within)
	for len(got) < n && time.Now().Before(deadline) {
		_, err := u.Wait(buf, 20*time.Millisecond)
		if err != nil && err != unix.EINTR {
			require.NoError(t, err)
		}
		got = append(got, u.Completions()...)
	}
	return got
}

func TestURingOpReadAndWrite(t *testing.T) {
	for _, tier := range []string{"defer", "coop", "plain"} {
		t.Run(tier, func(t *testing.T) {
			u := uringOpsOrSkip(t, tier)
			a, b := newStreamPair(t)
			buf := make([]byte, 16)
			require.NoError(t, u.SubmitOp(Op{Kind: OpRead, FD: int32(a.FD()), Ptr: uintptr(unsafe.Pointer(&buf[0])), Len: 16, ID: 7<<32 | 3}))
			assert.Equal(t, 1, u.OpsInFlight())
			assert.Empty(t, waitOps(t, u, 1, 30*time.Millisecond), "nothing to read yet")
			b.Write(t, []byte("hello"))
			got := waitOps(t, u, 1, 2*time.Second)
			require.Len(t, got, 1)
			assert.Equal(t, OpResult{ID: 7<<32 | 3, Result: 5}, got[0])
			assert.Equal(t, "hello", string(buf[:5]))
			assert.Equal(t, 0, u.OpsInFlight())

			out := []byte("world")
			require.NoError(t, u.SubmitOp(Op{Kind: OpWrite, FD: int32(b.FD()), Ptr: uintptr(unsafe.Pointer(&out[0])), Len: 5, ID: 4}))
			got = waitOps(t, u, 1, 2*time.Second)
			require.Len(t, got, 1)
			assert.Equal(t, int64(5), got[0].Result)
			n, err := unix.Read(a.FD(), buf)
			require.NoError(t, err)
			assert.Equal(t, "world", string(buf[:n]))
		})
	}
}

func TestURingOpCancel(t *testing.T) {
	u := uringOpsOrSkip(t, "defer")
	a, b := newStreamPair(t)
	buf := make([]byte, 16)
	require.NoError(t, u.SubmitOp(Op{Kind: OpRead, FD: int32(a.FD()), Ptr: uintptr(unsafe.Pointer(&buf[0])), Len: 16, ID: 1}))
	waitOps(t, u, 1, 10*time.Millisecond)
	require.NoError(t, u.CancelOp(1))
	got := waitOps(t, u, 1, 2*time.Second)
	require.Len(t, got, 1)
	assert.Equal(t, -int64(unix.ECANCELED), got[0].Result)
	// the cancelled read consumed nothing
	b.Write(t, []byte("z"))
	n, err := unix.Read(a.FD(), buf)
	require.NoError(t, err)
	assert.Equal(t, "z", string(buf[:n]))
	assert.Zero(t, buf[1], "the kernel wrote into the buffer after the completion")
	// cancelling a reaped op is harmless
	require.NoError(t, u.CancelOp(1))
	assert.Empty(t, waitOps(t, u, 1, 20*time.Millisecond))
}

func TestURingOpSlotInUseAndInvalid(t *testing.T) {
	u := uringOpsOrSkip(t, "defer")
	a, _ := newStreamPair(t)
	buf := make([]byte, 4)
	p := uintptr(unsafe.Pointer(&buf[0]))
	require.NoError(t, u.SubmitOp(Op{Kind: OpRead, FD: int32(a.FD()), Ptr: p, Len: 4, ID: 9}))
	assert.Error(t, u.SubmitOp(Op{Kind: OpRead, FD: int32(a.FD()), Ptr: p, Len: 4, ID: 1<<32 | 9}), "slot busy")
	assert.Error(t, u.SubmitOp(Op{Kind: OpRead, FD: -1, Ptr: p, Len: 4, ID: 10}))
	assert.Error(t, u.SubmitOp(Op{Kind: OpRead, FD: 3, Ptr: 0, Len: 4, ID: 10}))
	assert.Error(t, u.SubmitOp(Op{Kind: 9, FD: 3, Ptr: p, Len: 4, ID: 10}))
	assert.Error(t, u.SubmitOp(Op{Kind: OpPread, FD: 3, Ptr: p, Len: 4, Offset: -1, ID: 10}))
}

// Close with operations in flight cancels and reaps them before the ring
// goes: nothing the kernel does afterwards can touch their memory.
func TestURingCloseDrainsOps(t *testing.T) {
	u := uringOpsOrSkip(t, "defer")
	a, b := newStreamPair(t)
	buf := make([]byte, 8)
	require.NoError(t, u.SubmitOp(Op{Kind: OpRead, FD: int32(a.FD()), Ptr: uintptr(unsafe.Pointer(&buf[0])), Len: 8, ID: 2}))
	waitOps(t, u, 1, 10*time.Millisecond)
	require.NoError(t, u.Close())
	assert.Equal(t, 0, u.OpsInFlight())
	b.Write(t, []byte("late"))
	n, err := unix.Read(a.FD(), buf)
	require.NoError(t, err)
	assert.Equal(t, "late", string(buf[:n]))
}

// Operations on a regular file: a positional read, two reads at the file
// position (the kernel advances it, as read(2) does: offset -1) and a
// positional write; with Async set, their SQEs carry IOSQE_ASYNC, without
// it they do not.
func TestURingOpsOnARegularFile(t *testing.T) {
	for _, async := range []bool{true, false} {
		name := map[bool]string{true: "async", false: "inline"}[async]
		t.Run(name, func(t *testing.T) {
			u := uringOpsOrSkip(t, "plain")
			path := t.TempDir() + "/f"
			fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT, 0o600)
			require.NoError(t, err)
			defer unix.Close(fd)
			_, err = unix.Write(fd, []byte("0123456789"))
			require.NoError(t, err)
			_, err = unix.Seek(fd, 0, 0)
			require.NoError(t, err)

			buf := make([]byte, 16)
			at := func(i int) uintptr { return uintptr(unsafe.Pointer(&buf[i])) }
			run := func(op Op) int64 {
				t.Helper()
				op.Async = async
				require.NoError(t, u.SubmitOp(op))
				e := u.ops[uint32(op.ID)]
				assert.Equal(t, async, u.ring.sqeAt(e.sqPos).Flags&uringSQEAsync != 0, "IOSQE_ASYNC as asked")
				got := waitOps(t, u, 1, 5*time.Second)
				require.Len(t, got, 1)
				return got[0].Result
			}
			assert.Equal(t, int64(5), run(Op{Kind: OpPread, FD: int32(fd), Ptr: at(0), Len: 5, Offset: 3, ID: 1}))
			assert.Equal(t, "34567", string(buf[:5]))
			assert.Equal(t, int64(4), run(Op{Kind: OpRead, FD: int32(fd), Ptr: at(0), Len: 4, ID: 2}))
			assert.Equal(t, int64(4), run(Op{Kind: OpRead, FD: int32(fd), Ptr: at(4), Len: 4, ID: 3}))
			assert.Equal(t, "01234567", string(buf[:8]), "the second read goes on from the file position")
			pos, err := unix.Seek(fd, 0, 1)
			require.NoError(t, err)
			assert.Equal(t, int64(8), pos)
			copy(buf, "AB")
			assert.Equal(t, int64(2), run(Op{Kind: OpPwrite, FD: int32(fd), Ptr: at(0), Len: 2, Offset: 1, ID: 4}))
			got := make([]byte, 10)
			_, err = unix.Pread(fd, got, 0)
			require.NoError(t, err)
			assert.Equal(t, "0AB3456789", string(got))
		})
	}
}
