//go:build unix

package driver

import (
	"encoding/binary"

	"golang.org/x/sys/unix"
)

// writeWake writes the 8-byte value 1 that both an eventfd and a pipe accept.
// EAGAIN means a wakeup is already pending, which is as good as ours.
func writeWake(fd int) error {
	var b [8]byte
	binary.NativeEndian.PutUint64(b[:], 1)
	_, err := unix.Write(fd, b[:])
	if err == unix.EAGAIN {
		return nil
	}
	return err
}
