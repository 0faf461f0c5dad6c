//go:build linux

package driver

import (
	"encoding/binary"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// The kernel's struct epoll_event is packed on x86 (12 bytes, its 64-bit data
// word at offset 4) and naturally aligned elsewhere, arm64 included (16
// bytes, data at offset 8). x/sys/unix mirrors that per GOARCH, and setData
// keeps a registration's fd and sequence number in the two halves of the
// data word (x/sys's Fd and Pad). Read at the wrong offset or stride, every
// event after the first of one epoll_wait would carry a neighbour's bytes:
// this runs on arm64 under qemu-user in .ci/cross-compile.sh.
func TestEpollEventLayoutMatchesTheKernel(t *testing.T) {
	var ev unix.EpollEvent
	size, data := unsafe.Sizeof(ev), unsafe.Offsetof(ev.Fd)
	switch runtime.GOARCH {
	case "amd64", "386":
		assert.Equal(t, uintptr(12), size, "packed on x86")
		assert.Equal(t, uintptr(4), data)
	default:
		assert.Equal(t, uintptr(16), size, "naturally aligned off x86")
		assert.Equal(t, uintptr(8), data)
	}
	assert.Equal(t, data+4, unsafe.Offsetof(ev.Pad), "Fd and Pad are the data word's two halves")

	// The word the kernel stores and hands back unchanged.
	setData(&ev, 0x01020304, 0xa0b0c0d0)
	word := unsafe.Slice((*byte)(unsafe.Pointer(&ev)), size)[data : data+8]
	if binary.NativeEndian.Uint16([]byte{1, 0}) == 1 { // little-endian: fd is the low half
		assert.Equal(t, uint64(0xa0b0c0d0)<<32|0x01020304, binary.LittleEndian.Uint64(word))
	}

	// Through the kernel: several descriptors ready at once come back from
	// one wait, each with its own fd and sequence number.
	e, err := NewEpoll()
	require.NoError(t, err)
	defer e.Close()
	want := map[int32]uint32{}
	for i := 0; i < 5; i++ {
		var p [2]int
		require.NoError(t, unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK))
		t.Cleanup(func() { unix.Close(p[0]); unix.Close(p[1]) })
		seq := uint32(0x7000_0000 + i*0x1111)
		require.NoError(t, e.Arm(p[0], seq, Readable))
		_, err := unix.Write(p[1], []byte{1})
		require.NoError(t, err)
		want[int32(p[0])] = seq
	}
	got := map[int32]uint32{}
	buf := make([]Event, 16)
	for deadline := time.Now().Add(5 * time.Second); len(got) < len(want) && time.Now().Before(deadline); {
		n, err := e.Wait(buf, 100*time.Millisecond)
		require.NoError(t, err)
		for _, ev := range buf[:n] {
			assert.NotZero(t, ev.Events&Readable, "fd %d", ev.FD)
			got[ev.FD] = ev.Seq
		}
	}
	assert.Equal(t, want, got)
}
