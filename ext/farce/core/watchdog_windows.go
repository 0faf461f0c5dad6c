package main

import "errors"

// errNoThreadSignals is why stall detection is refused on Windows: it
// interrupts the stalled thread with a signal, and Windows has none to send
// to one thread.
var errNoThreadSignals = errors.New("stall detection is not available on Windows: it signals the loop's thread, and Windows has no per-thread signals")

func threadSignaller(int) (func(tid int64), error) { return nil, errNoThreadSignals }
