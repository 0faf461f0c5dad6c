//go:build !windows

package main

import "golang.org/x/sys/unix"

// threadSignaller returns what the watchdog calls with the loop's thread id
// when a turn lasts too long: tgkill with sig, to this process's thread.
func threadSignaller(sig int) (func(tid int64), error) {
	pid := unix.Getpid()
	return func(tid int64) { _ = unix.Tgkill(pid, int(tid), unix.Signal(sig)) }, nil
}
