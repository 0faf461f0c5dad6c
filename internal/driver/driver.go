// Package driver holds farce's kernel event drivers behind one small
// interface. A driver reports readiness of file descriptors; it knows nothing
// of fibers, waits or timers (internal/sched owns those).
//
// A Driver is owned by one scheduler and used from one goroutine at a time,
// with one exception: Wake (and a write to WakeFD) may happen from any thread,
// including a signal-safe unblock function in C.
package driver

import (
	"errors"
	"fmt"
	"time"
)

// Events is a set of readiness conditions. The low bits are Ruby's IO event
// bits (IO::READABLE, IO::PRIORITY, IO::WRITABLE) so they cross the C
// boundary unchanged.
type Events uint32

const (
	Readable Events = 1 // IO::READABLE
	Priority Events = 2 // IO::PRIORITY
	Writable Events = 4 // IO::WRITABLE
	// Hangup is set with Readable|Writable when the peer hung up or the
	// descriptor is in error: the follow-up read or write surfaces the cause.
	Hangup Events = 8
	// ReadHangup is set with Readable when the peer shut down its writing
	// side: reads return end-of-file from now on, writes may still work.
	ReadHangup Events = 16

	// RubyMask is the set of bits a caller may ask for.
	RubyMask = Readable | Priority | Writable
)

func (e Events) String() string {
	s := ""
	for _, b := range []struct {
		bit  Events
		name string
	}{{Readable, "r"}, {Priority, "p"}, {Writable, "w"}, {Hangup, "h"}, {ReadHangup, "e"}} {
		if e&b.bit != 0 {
			s += b.name
		}
	}
	if s == "" {
		return "-"
	}
	return s
}

// Event is one readiness report. Seq is the value passed to Arm, echoed back
// so that the scheduler can drop events meant for an earlier user of a
// reused descriptor number.
type Event struct {
	FD     int32
	Seq    uint32
	Events Events
}

// Driver is a kernel readiness notifier.
type Driver interface {
	// Name is the backend name Ruby sees (:epoll, :poll, ...).
	Name() string
	// Persistent reports whether one Arm per (fd, seq) is enough: such
	// drivers (epoll, kqueue, edge-triggered) report every later readiness
	// edge in both directions without being asked again. Drivers that are not
	// persistent (poll) report once per Arm and must be armed again.
	Persistent() bool
	// Arm asks for an Event when fd becomes ready for any of events.
	// It returns ErrNotPollable for descriptors the kernel cannot watch
	// (regular files): those are always ready.
	Arm(fd int, seq uint32, events Events) error
	// Disarm forgets fd. It is called before a descriptor number is handed
	// to a new owner; errors for descriptors the kernel already dropped
	// (closed) are not reported.
	Disarm(fd int) error
	// Wait blocks for up to timeout (negative: no limit, zero: just poll)
	// and stores events into buf. It returns EINTR to the caller rather than
	// retrying, so that a signal reaches Ruby without delay. A Wake makes it
	// return (possibly with n == 0).
	Wait(buf []Event, timeout time.Duration) (n int, err error)
	// Wake makes the current or the next Wait return. Safe from any thread.
	Wake() error
	// WakeFD is a descriptor to which writing 8 bytes (a native-endian
	// uint64 of 1) has the effect of Wake; C unblock functions use it because
	// writing is async-signal-safe.
	WakeFD() int
	// Close releases the driver's descriptors.
	Close() error
}

// KernelCalls counts the system calls a driver made since it was created,
// so that stats can show how many a request costs (issue: io_uring's promise
// is fewer of them).
type KernelCalls struct {
	Total  uint64 // every system call the driver made: waits, registrations, enters, wake drains
	Enters uint64 // of which io_uring_enter (0 for other drivers)
}

// Counter is implemented by drivers that count their system calls.
// KernelCalls may be called from any thread, also while Wait blocks.
type Counter interface {
	KernelCalls() KernelCalls
}

// MaxFD bounds the descriptor numbers drivers (and the scheduler) accept:
// tables indexed by descriptor grow to the largest number seen, so a bogus
// huge number must be refused before it allocates (2^24 entries are
// already hundreds of MB; doubling past 2^30 overflows an int32).
const MaxFD = 1 << 24

// ErrNotPollable is returned by Arm for descriptors that cannot be watched.
var ErrNotPollable = errors.New("descriptor cannot be polled (regular file?)")

// ErrUnknownBackend is wrapped by Open for names it does not know.
var ErrUnknownBackend = errors.New("unknown backend")

// ErrUnavailable is wrapped by Open for backends this system or kernel lacks.
var ErrUnavailable = errors.New("backend unavailable")

// timeoutMillis converts a Wait timeout to the millisecond argument of
// epoll_wait/poll, rounding up so that a sleeper never wakes before its
// deadline and spins.
func timeoutMillis(d time.Duration) int {
	if d < 0 {
		return -1
	}
	ms := (d + time.Millisecond - 1) / time.Millisecond
	if ms > 1<<30 {
		ms = 1 << 30
	}
	return int(ms)
}

// Choices lists the names Open accepts on this system, "auto" first, comma
// separated: the one backend list, which Ruby gets through farce_backends.
func Choices() string { return choices() }

// Open creates the named driver. "auto" picks the best one this system has
// and returns why it did not pick a better one (empty when it did).
func Open(name string) (d Driver, fallbackReason string, err error) {
	if name == "auto" {
		return openAuto()
	}
	ctor, ok := constructors()[name]
	if !ok {
		return nil, "", fmt.Errorf("%w %q (choices: %s)", ErrUnknownBackend, name, choices())
	}
	d, err = ctor()
	return d, "", err
}

// OpKind is the operation a Completer performs.
type OpKind uint8

const (
	OpRead   OpKind = 1 // read(2) at the file position (streams: sockets, pipes)
	OpWrite  OpKind = 2 // write(2) at the file position
	OpPread  OpKind = 3 // pread(2) at Offset
	OpPwrite OpKind = 4 // pwrite(2) at Offset

	// OpAsync, or'ed into a kind handed to sched.Scheduler.SubmitOp (and
	// the core's farce_submit_op), sets Op.Async.
	OpAsync OpKind = 0x10
)

// Op is one completion-based operation. Ptr/Len name C memory that the
// caller keeps alive and untouched until the Op's OpResult has been returned
// by Completions (rule 1 of docs/cgo-hazards.md: Go never owns it, the kernel writes
// or reads it while the operation is in flight).
type Op struct {
	Kind   OpKind
	FD     int32
	Ptr    uintptr
	Len    uint32
	Offset int64
	// ID names the operation in its OpResult and in CancelOp; only its low
	// 56 bits are kept (OpIDMask).
	ID uint64
	// Async: performed by the kernel's worker threads from the start
	// (io_uring's IOSQE_ASYNC), never inline in the submitting call. For
	// regular files: a read that misses the page cache would otherwise
	// start its readahead inside io_uring_enter, which sleeps there while
	// the disk's queue is full (measured: the loop held for 0.4-0.7 s with
	// 64 reads of 4 MiB in flight, docs/behaviour.md). Completers without
	// such a mode ignore it.
	Async bool
}

// OpIDMask: the bits of Op.ID a Completer keeps.
const OpIDMask = 1<<56 - 1

// OpResult is the completion of an Op: a byte count or -errno.
type OpResult struct {
	ID     uint64
	Result int64
}

// Completer is implemented by drivers that perform I/O operations
// themselves (io_uring). Every submitted Op produces exactly one OpResult,
// cancelled or not (a cancelled one usually with -ECANCELED, but it may
// also have completed meanwhile); until then its memory must stay valid.
// Submissions are queued and handed to the kernel by the next Wait, whose
// reaped completions Completions returns.
type Completer interface {
	// SupportsOps reports whether this driver instance can run Ops.
	SupportsOps() bool
	// SubmitOp queues op.
	SubmitOp(op Op) error
	// CancelOp asks the kernel to cancel an operation in flight; its
	// OpResult still follows.
	CancelOp(id uint64) error
	// Completions returns the OpResults reaped by the last Wait (valid
	// until the next Wait) and forgets them.
	Completions() []OpResult
	// OpsInFlight is how many Ops have not produced their OpResult yet.
	OpsInFlight() int
}

// Deferrer is implemented by drivers whose Wait(0) may leave queued
// submissions for the Wait after it (io_uring), on the bet that a caller
// that found nothing blocks next. SubmitNextWait(true) calls that bet off
// for the next Wait: its caller has work to hand out from this poll and
// runs it before it polls again, so a descriptor armed in this very poll
// would go unreported for a whole iteration (io-event's select reports
// what the kernel has ready in the one call).
type Deferrer interface {
	SubmitNextWait(now bool)
}

// Drainer is implemented by Completers that can wait for their operations
// to end: DrainOps cancels every Op in flight and waits up to timeout
// (negative: no limit) for their OpResults (handed out by Completions),
// returning how many are still in flight. Memory an Op names may be
// released only once this reports 0.
type Drainer interface {
	DrainOps(timeout time.Duration) (left int, err error)
}
