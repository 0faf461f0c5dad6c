// Command export builds libfarce_core.so (-buildmode=c-shared): the C ABI of
// farce_core.h over internal/sched and internal/driver. This file holds its
// //export functions (and yieldWith and bindWaits, which some of them
// share), and they only translate: validate the integers they are handed,
// call the core under its lock, turn errors into codes. The handle map and
// the locks are in handles.go, the poll path in poll.go, the stall
// watchdog's glue in watchdog.go, stats in stats.go, the codes in codes.go.
// It never calls Ruby and never blocks except in farce_poll with blockNS !=
// 0, which the extension runs with the GVL released.
package main

/*
#cgo linux LDFLAGS: -Wl,--wrap=pthread_getattr_np
#include <stdlib.h>
#include <string.h>
#include "farce_core.h"
*/
import "C"

import (
	"errors"
	"syscall"
	"time"
	"unsafe"

	"github.com/farce-rb/farce/internal/driver"
	"github.com/farce-rb/farce/internal/sched"
)

func main() {}

//export farce_core_abi
func farce_core_abi() C.int64_t { return C.FARCE_CORE_ABI }

// farce_set_handle_base makes the handles this copy of the core hands out
// start after base; it must come before the first farce_new. The loader
// gives each fork generation its own range (a forked child loads a fresh
// copy of this library), so that a handle inherited from a parent's copy is
// unknown here: a stray call with one fails with FARCE_E_HANDLE instead of
// reaching one of this copy's schedulers.
//
//export farce_set_handle_base
func farce_set_handle_base(base C.int64_t) C.int64_t {
	if !setHandleBase(base) {
		return -C.FARCE_E_ARGUMENT
	}
	return 0
}

// farce_new creates a scheduler. On success it returns a handle > 0 and
// fills name (the backend chosen), reason (why auto fell back, or "") and
// wakeFD. On failure it returns a negative code and fills reason with the
// message.
//
//export farce_new
func farce_new(backend *C.char, name *C.char, nameLen C.int, reason *C.char, reasonLen C.int, wakeFD *C.int) C.int64_t {
	if backend == nil || wakeFD == nil {
		return -C.FARCE_E_ARGUMENT
	}
	d, why, err := driver.Open(C.GoString(backend))
	if err != nil {
		copyOut(reason, reasonLen, err.Error())
		if errors.Is(err, driver.ErrUnknownBackend) {
			return -C.FARCE_E_ARGUMENT // a name this system does not offer (farce_backends lists them)
		}
		return -C.FARCE_E_BACKEND
	}
	copyOut(name, nameLen, d.Name())
	copyOut(reason, reasonLen, why)
	*wakeFD = C.int(wakeNumber(d)) // Unix: the driver's descriptor; Windows: a number for farce_wake_number
	return C.int64_t(openHandle(d))
}

// farce_backends copies the backend names this system offers ("auto, epoll,
// io_uring, poll"), NUL-terminated, into buf and returns their length.
//
//export farce_backends
func farce_backends(buf *C.char, n C.int) C.int64_t {
	choices := driver.Choices()
	copyOut(buf, n, choices)
	return C.int64_t(len(choices))
}

// farce_probe returns the events (Ruby's bits) fd is ready for this instant,
// 0 when none, or a negative code. It needs no scheduler: IO.select's
// instant check, with the same mapping of hang-ups as every wait.
//
//export farce_probe
func farce_probe(fd C.int, events C.uint32_t) C.int64_t {
	got, _, err := sched.ProbeFD(int(fd), sched.Events(events))
	if err != nil {
		var errno syscall.Errno
		if errors.As(err, &errno) {
			return -C.int64_t(errno)
		}
		return -C.FARCE_E_ARGUMENT
	}
	return C.int64_t(got)
}

//export farce_close
func farce_close(h C.int64_t) C.int64_t {
	c := removeHandle(h)
	if c == nil {
		return -C.FARCE_E_HANDLE
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.waitPollEnd()
	c.dropTurns()
	forgetWakeNumber(c.s.Driver())
	if err := c.s.Close(); err != nil {
		return c.fail(err)
	}
	return 0
}

//export farce_last_error
func farce_last_error(h C.int64_t, buf *C.char, n C.int) {
	c := lookup(h)
	if c == nil {
		copyOut(buf, n, "scheduler handle is closed")
		return
	}
	c.mu.Lock()
	copyOut(buf, n, c.lastErr)
	c.mu.Unlock()
}

// farce_wait_fd returns the ready events (> 0) when the answer is known at
// once, 0 after parking a wait named by *token, or a negative code.
//
//export farce_wait_fd
func farce_wait_fd(h C.int64_t, fd C.int, events C.uint32_t, timeoutNS C.int64_t, known C.int, token *C.uint64_t) C.int64_t {
	if token == nil {
		return -C.FARCE_E_HANDLE
	}
	var code C.int64_t
	c := acquireDriver(h, &code)
	if c == nil {
		return code
	}
	defer c.mu.Unlock()
	tok, ready, err := c.s.WaitFD(int(fd), sched.Events(events), durationNS(timeoutNS), sched.Readiness(known))
	if err != nil {
		return c.fail(err)
	}
	*token = C.uint64_t(tok)
	return C.int64_t(ready)
}

//export farce_park
func farce_park(h C.int64_t, timeoutNS C.int64_t, token *C.uint64_t) C.int64_t {
	if token == nil {
		return -C.FARCE_E_HANDLE
	}
	c := acquire(h)
	if c == nil {
		return -C.FARCE_E_HANDLE
	}
	defer c.mu.Unlock()
	tok, err := c.s.Park(durationNS(timeoutNS))
	if err != nil {
		return c.fail(err)
	}
	*token = C.uint64_t(tok)
	return 0
}

//export farce_yield
func farce_yield(h C.int64_t, token *C.uint64_t) C.int64_t {
	return yieldWith(h, token, (*sched.Scheduler).Yield)
}

// yieldWith hands out the token of a yield (plain or last) under the core's lock.
func yieldWith(h C.int64_t, token *C.uint64_t, yield func(*sched.Scheduler) (sched.Token, error)) C.int64_t {
	if token == nil {
		return -C.FARCE_E_HANDLE
	}
	c := acquire(h)
	if c == nil {
		return -C.FARCE_E_HANDLE
	}
	defer c.mu.Unlock()
	tok, err := yield(c.s)
	if err != nil {
		return c.fail(err)
	}
	*token = C.uint64_t(tok)
	return 0
}

// farce_yield_last is farce_yield for a fiber giving the loop a turn: its
// wait finishes at the end of the next poll, behind the timers and events
// that poll delivers (sched.YieldLast).
//
//export farce_yield_last
func farce_yield_last(h C.int64_t, token *C.uint64_t) C.int64_t {
	return yieldWith(h, token, (*sched.Scheduler).YieldLast)
}

// farce_stall_watch starts a watchdog goroutine that signals the loop's
// thread (signo, through tgkill) once per turn that lasts thresholdNS or
// more; thresholdNS <= 0 stops it. state becomes the core's: it is freed
// when the handle closes (the extension writes it until then). A new call
// replaces the watchdog (same or first state only).
//
//export farce_stall_watch
func farce_stall_watch(h C.int64_t, state *C.farce_turn_state, thresholdNS C.int64_t, signo C.int) C.int64_t {
	c := acquire(h)
	if c == nil {
		return -C.FARCE_E_HANDLE
	}
	defer c.mu.Unlock()
	if state == nil || (c.turns != nil && c.turns != state) || signo <= 0 || signo >= 65 {
		return c.fail(errors.New("farce_stall_watch: bad state or signal"))
	}
	if err := c.watch(state, time.Duration(thresholdNS), int(signo)); err != nil {
		return c.fail(err)
	}
	return 0
}

// farce_wake returns 1 when the wait was woken, 0 when it had already ended.
//
//export farce_wake
func farce_wake(h C.int64_t, token C.uint64_t) C.int64_t {
	c := acquire(h)
	if c == nil {
		return -C.FARCE_E_HANDLE
	}
	defer c.mu.Unlock()
	return boolCode(c.s.Wake(sched.Token(token)))
}

//export farce_cancel
func farce_cancel(h C.int64_t, token C.uint64_t) C.int64_t {
	c := acquire(h)
	if c == nil {
		return -C.FARCE_E_HANDLE
	}
	defer c.mu.Unlock()
	return boolCode(c.s.Cancel(sched.Token(token)))
}

//export farce_forget_fd
func farce_forget_fd(h C.int64_t, fd C.int) C.int64_t {
	var code C.int64_t
	c := acquireDriver(h, &code)
	if c == nil {
		return code
	}
	defer c.mu.Unlock()
	if err := c.s.ForgetFD(int(fd)); err != nil {
		return c.fail(err)
	}
	return 0
}

// farce_set_fd_file tells the core which open file fd names now
// (sched.SetFDFile): 1 when it named another one, whose waiters then
// finished with ResultClosed; 0 when nothing changed.
//
//export farce_set_fd_file
func farce_set_fd_file(h C.int64_t, fd C.int, dev C.uint64_t, ino C.uint64_t) C.int64_t {
	var code C.int64_t
	c := acquireDriver(h, &code)
	if c == nil {
		return code
	}
	defer c.mu.Unlock()
	changed, err := c.s.SetFDFile(int(fd), sched.FileID{Dev: uint64(dev), Ino: uint64(ino)})
	if err != nil {
		return c.fail(err)
	}
	return boolCode(changed)
}

// farce_poll runs one loop iteration and stores up to capacity finished
// waits in out. blockNS bounds how long it may sleep waiting for the next
// timer, event or wakeup: 0 never blocks, a negative value has no bound.
// EINTR comes back as -EINTR so that Ruby runs its interrupts at once.
//
//export farce_poll
func farce_poll(h C.int64_t, blockNS C.int64_t, out *C.farce_completion, capacity C.int) C.int64_t {
	return poll(h, blockNS, out, capacity, nil)
}

// farce_tick moves the scheduler tick of the calling thread's goroutine
// (sched_tick.go) when schedTickEvery has passed since it last moved. The
// loop calls it between fibers when it has not polled for that long: with
// many fibers ready a loop iteration runs Ruby for tens of milliseconds, and
// a poll alone would leave sysmon to take the P each iteration (it did,
// at 1,000 connections: docs/benchmarks.md, "Cost against connections").
//
//export farce_tick
func farce_tick(h C.int64_t) C.int64_t {
	c := lookup(h)
	if c == nil {
		return -C.FARCE_E_HANDLE
	}
	c.tick.refresh()
	return 0
}

// farce_poll_noting is farce_poll that first takes when the fibers of the
// previous batch resumed (resumed[k] for its k-th completion, CLOCK_MONOTONIC
// ns, 0 for one not resumed; nresumed of them) for the wake-up latency
// histogram (farce_stats).
//
//export farce_poll_noting
func farce_poll_noting(h C.int64_t, blockNS C.int64_t, out *C.farce_completion, capacity C.int,
	resumed *C.int64_t, nresumed C.int) C.int64_t {
	var at []int64
	if resumed != nil && nresumed > 0 {
		at = unsafe.Slice((*int64)(unsafe.Pointer(resumed)), int(nresumed))
	}
	return poll(h, blockNS, out, capacity, at)
}

// farce_poll_batch is farce_poll_noting that also starts the waits fibers
// parked on since the last poll (args.waits, on tokens this call reserved
// earlier) and then applies the wakes asked for since (args.wakes), before
// it polls, and tops the caller's reserve of tokens up to
// args.reserve_cap (sched.Reserve): a fiber that waits on a descriptor or
// parks untimed, and a wake, then cost no call of their own. A wait whose token no longer
// names a reserved slot (cancelled meanwhile) is skipped. The waits are
// started even when the poll then fails.
//
//export farce_poll_batch
func farce_poll_batch(h C.int64_t, blockNS C.int64_t, out *C.farce_completion, capacity C.int, args *C.farce_poll_args) C.int64_t {
	if args == nil {
		return poll(h, blockNS, out, capacity, nil)
	}
	var at []int64
	if args.resumed != nil && args.nresumed > 0 {
		at = unsafe.Slice((*int64)(unsafe.Pointer(args.resumed)), int(args.nresumed))
	}
	latency := args.flags&C.FARCE_POLL_WAKEUP_LATENCY != 0
	var polledAt int64
	r := pollWith(h, blockNS, out, capacity, at, &polledAt, func(c *core) C.int64_t {
		c.s.RecordWakeups(latency)
		if args.waits != nil && args.nwaits > 0 {
			bindWaits(c, unsafe.Slice(args.waits, int(args.nwaits)))
		}
		if args.wakes != nil && args.nwakes > 0 {
			for _, tok := range unsafe.Slice((*uint64)(unsafe.Pointer(args.wakes)), int(args.nwakes)) {
				c.s.Wake(sched.Token(tok))
			}
		}
		if args.reserve != nil && args.reserve_cap > 0 {
			res := unsafe.Slice((*uint64)(unsafe.Pointer(args.reserve)), int(args.reserve_cap))
			n := int(args.reserved)
			if n < 0 || n > len(res) {
				return c.fail(errors.New("farce_poll_batch: bad reserve count"))
			}
			for ; n < len(res); n++ {
				tok, err := c.s.Reserve()
				if err != nil {
					break
				}
				res[n] = uint64(tok)
			}
			args.reserved = C.int32_t(n)
		}
		return 0
	})
	args.polled_at = C.int64_t(polledAt)
	return r
}

// farce_bind_waits starts descriptor waits on reserved tokens now, as the
// next farce_poll_batch would: the extension calls it before anything that
// must see them started (forgetting a descriptor).
//
//export farce_bind_waits
func farce_bind_waits(h C.int64_t, waits *C.farce_fd_wait, n C.int) C.int64_t {
	var code C.int64_t
	c := acquireDriver(h, &code)
	if c == nil {
		return code
	}
	defer c.mu.Unlock()
	if waits == nil || n < 0 {
		return c.fail(errors.New("farce_bind_waits: bad list"))
	}
	bindWaits(c, unsafe.Slice(waits, int(n)))
	return 0
}

// bindWaits starts the waits (sched.BindFD, sched.BindPark). Called with c.mu held.
func bindWaits(c *core, waits []C.farce_fd_wait) {
	for _, w := range waits {
		if w.fd < 0 {
			c.s.BindPark(sched.Token(w.token))
			continue
		}
		c.s.BindFD(sched.Token(w.token), int(w.fd), sched.Events(w.events), sched.Readiness(w.known))
	}
}

//export farce_stats
func farce_stats(h C.int64_t, out *C.int64_t, n C.int) C.int64_t {
	c := lookup(h)
	if c == nil {
		return -C.FARCE_E_HANDLE
	}
	if out == nil || n < C.FARCE_STAT_COUNT {
		return -C.FARCE_E_ARGUMENT
	}
	c.fillStats(unsafe.Slice((*int64)(unsafe.Pointer(out)), int(n)))
	return 0
}

// farce_ops_supported returns 1 when the scheduler's driver performs
// completion operations (farce_submit_op), else 0.
//
//export farce_ops_supported
func farce_ops_supported(h C.int64_t) C.int64_t {
	c := acquire(h)
	if c == nil {
		return -C.FARCE_E_HANDLE
	}
	defer c.mu.Unlock()
	if c.s.SupportsOps() {
		return 1
	}
	return 0
}

// farce_submit_op starts a read or write (FARCE_OP_*) of length bytes at
// ptr, C memory the caller keeps valid and does not touch until the wait
// named by *token has completed (its result: bytes or -errno). Returns 0 or
// a negative code.
//
//export farce_submit_op
func farce_submit_op(h C.int64_t, kind C.int, fd C.int, ptr C.uint64_t, length C.uint64_t, offset C.int64_t, token *C.uint64_t) C.int64_t {
	if token == nil {
		return -C.FARCE_E_HANDLE
	}
	var code C.int64_t
	c := acquireDriver(h, &code)
	if c == nil {
		return code
	}
	defer c.mu.Unlock()
	tok, err := c.s.SubmitOp(driver.OpKind(kind), int(fd), uintptr(ptr), uint64(length), int64(offset))
	if err != nil {
		return c.fail(err)
	}
	*token = C.uint64_t(tok)
	return 0
}

// farce_cancel_op asks the kernel to stop the operation token names. It
// returns 1 when the operation is still in flight (its completion follows
// and the memory stays the kernel's until then), 0 when it has already
// completed.
//
//export farce_cancel_op
func farce_cancel_op(h C.int64_t, token C.uint64_t) C.int64_t {
	var code C.int64_t
	c := acquireDriver(h, &code)
	if c == nil {
		return code
	}
	defer c.mu.Unlock()
	return boolCode(c.s.CancelOp(sched.Token(token)))
}

// farce_ops_in_flight returns how many completion operations have not
// completed yet: their memory is still the kernel's.
//
//export farce_ops_in_flight
func farce_ops_in_flight(h C.int64_t) C.int64_t {
	c := acquire(h)
	if c == nil {
		return -C.FARCE_E_HANDLE
	}
	defer c.mu.Unlock()
	return C.int64_t(c.s.OpsInFlight())
}

// farce_drain_ops cancels every completion operation in flight and waits
// up to timeoutNS (negative: no limit) for the kernel to complete them; it
// returns how many are still in flight (0: every operation's memory may be
// released), -FARCE_E_THREAD when called from a thread other than the one
// that runs the scheduler (only that thread can reap an io_uring ring's
// completions), or -EINTR (run interrupts, call again). It blocks: call it
// with the GVL released, with a short timeout in a loop. The completions
// it reaped finish their waits as usual (farce_poll hands them out).
//
// A front end must not release any operation's memory (unpin a buffer or
// fiber) before this returned 0: closing, abandoning, and a scheduler
// collected by GC (which must therefore stay reachable while operations
// are in flight).
//
//export farce_drain_ops
func farce_drain_ops(h C.int64_t, timeoutNS C.int64_t) C.int64_t {
	var code C.int64_t
	c := acquireDriver(h, &code)
	if c == nil {
		return code
	}
	defer c.mu.Unlock()
	left, err := c.s.DrainOps(durationNS(timeoutNS))
	if err != nil {
		return c.fail(err)
	}
	return C.int64_t(left)
}
