//go:build unix

package driver

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

const probeMayBeUnknown = false

type endpoint struct{ fd int }

func (e *endpoint) FD() int { return e.fd }

func (e *endpoint) Write(t *testing.T, p []byte) {
	_, err := unix.Write(e.fd, p)
	require.NoError(t, err)
}

func (e *endpoint) Close(t *testing.T) {
	if e.fd >= 0 {
		require.NoError(t, unix.Close(e.fd))
		e.fd = -1
	}
}

// newStreamPair is a non-blocking AF_UNIX socketpair, closed at cleanup.
func newStreamPair(t *testing.T) (*endpoint, *endpoint) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	require.NoError(t, err)
	a, b := &endpoint{fds[0]}, &endpoint{fds[1]}
	for _, e := range []*endpoint{a, b} {
		require.NoError(t, unix.SetNonblock(e.fd, true))
		e := e
		t.Cleanup(func() {
			if e.fd >= 0 {
				unix.Close(e.fd)
			}
		})
	}
	return a, b
}

func regularFile(t *testing.T) int {
	f, err := os.Create(filepath.Join(t.TempDir(), "regular"))
	require.NoError(t, err)
	_, err = f.WriteString("data")
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	return int(f.Fd())
}

func writeWakeFD(fd int) error { return writeWake(fd) }

func isEINTR(err error) bool { return err == unix.EINTR }

func skipUnavailable(t *testing.T, err error) { t.Skipf("backend unavailable here: %v", err) }
