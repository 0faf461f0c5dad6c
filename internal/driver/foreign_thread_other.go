//go:build !linux

package driver

import "errors"

// ErrForeignThread is what io_uring (Linux only) returns when a ring is
// entered from a thread that does not own its operations. No driver on this
// system returns it; it is declared so that callers can test for it on
// every system without build tags of their own.
var ErrForeignThread = errors.New("operations in flight belong to the thread that runs this scheduler; use a scheduler only from that thread")
