//go:build !windows

package main

import "github.com/farce-rb/farce/internal/driver"

// wakeNumber is what farce_new hands the extension as its wake descriptor:
// on Unix the driver's own (an eventfd or a pipe), which an unblock
// function writes (async-signal-safe).
func wakeNumber(d driver.Driver) int { return d.WakeFD() }

// forgetWakeNumber: nothing to forget, the driver closes its descriptor.
func forgetWakeNumber(driver.Driver) {}
