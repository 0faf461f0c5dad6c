//go:build windows

package driver

import (
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// Probe may answer 0 ("unknown") on Windows; see probe_windows.go.
const probeMayBeUnknown = true

// endpoint is one end of a loopback TCP connection (Windows has no
// socketpair). FD is the SOCKET handle, which is what the IOCP driver takes.
type endpoint struct {
	c  net.Conn
	fd int
}

func (e *endpoint) FD() int { return e.fd }

func (e *endpoint) Write(t *testing.T, p []byte) {
	_, err := e.c.Write(p)
	require.NoError(t, err)
}

func (e *endpoint) Close(t *testing.T) {
	if e.c != nil {
		require.NoError(t, e.c.Close())
		e.c = nil
	}
}

func newStreamPair(t *testing.T) (*endpoint, *endpoint) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	bc, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	ac := <-accepted
	require.NotNil(t, ac)
	a, b := &endpoint{c: ac, fd: socketOf(t, ac)}, &endpoint{c: bc, fd: socketOf(t, bc)}
	t.Cleanup(func() {
		for _, e := range []*endpoint{a, b} {
			if e.c != nil {
				e.c.Close()
			}
		}
	})
	return a, b
}

func socketOf(t *testing.T, c net.Conn) int {
	rc, err := c.(syscall.Conn).SyscallConn()
	require.NoError(t, err)
	var fd int
	require.NoError(t, rc.Control(func(s uintptr) { fd = int(s) }))
	return fd
}

func regularFile(t *testing.T) int {
	f, err := os.Create(filepath.Join(t.TempDir(), "regular"))
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	return int(f.Fd())
}

func writeWakeFD(fd int) error { panic("no wake descriptor on windows") }

func isEINTR(err error) bool { return false } // Windows waits are not interrupted by signals

func skipUnavailable(t *testing.T, err error) {
	// Under wine, or on a Windows without the AFD driver, the IOCP driver
	// cannot be created: that is a limit of the host, detected at run time.
	t.Skipf("backend unavailable on this host: %v", err)
}
