//go:build windows

package driver

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/windows"
)

// IOCP is the Windows driver: an I/O completion port, with socket readiness
// from IOCTL_AFD_POLL requests on a handle to the AFD driver (\Device\Afd),
// the technique of wepoll and libuv. A poll names the socket's base handle
// (SIO_BASE_HANDLE: the poll must reach the real socket below any layered
// provider) and completes once, when the socket is ready, so the driver is
// one-shot like Poll: Persistent is false and each wait needs an Arm.
//
// The fd passed to Arm is the SOCKET handle's value (the extension converts a
// CRT descriptor with _get_osfhandle). Only sockets can be polled; anything
// else is ErrNotPollable. At most one poll is in flight per socket: an Arm
// for events the pending poll does not cover cancels it, and the poll is
// resubmitted with the union once the cancelled one has completed.
//
// Every poll is an operation of an opTable (iocp_op.go): its record, which
// the kernel writes on completion, is reused only after its completion
// packet was reaped, and packets that name no live operation are dropped.
//
// There is no descriptor to write to for a wakeup: WakeFD is -1, and C
// unblock functions call Wake (PostQueuedCompletionStatus is safe from any
// thread).
type IOCP struct {
	port, afd   windows.Handle
	ops         *opTable[*afdPollOp]
	socks       map[int32]*afdSock
	entries     []overlappedEntry
	wakePending atomic.Int32
	strays      int // packets dropped as stray or duplicate (for tests)
}

// afdPollOp is the memory of one poll that the kernel writes.
type afdPollOp struct {
	iosb windows.IO_STATUS_BLOCK
	info afdPollInfo
	sock *afdSock // owner; nil once the owner was disarmed
}

type afdSock struct {
	fd       int32
	base     windows.Handle
	seq      uint32
	want     Events // events the current waiter asked for; 0: none
	op       opID   // poll in flight, 0 if none
	opEvents Events // events the poll in flight asks for
}

// Completion keys: which kind of packet a port entry is.
const (
	afdKey  = 1
	wakeKey = 2
)

// closeDrainTimeout bounds how long Close waits for cancelled polls to
// complete before it abandons their memory for good.
const closeDrainTimeout = 2 * time.Second

// leakedOps keeps the records of polls that never completed before Close
// gave up: the kernel may still write them, so they live as long as the
// process does.
var leakedOps struct {
	sync.Mutex
	ops []*afdPollOp
}

var afdNames = []string{`\Device\Afd\Farce`, `\Device\Afd`}

// NewIOCP creates a completion port and opens the AFD driver.
func NewIOCP() (*IOCP, error) {
	port, err := windows.CreateIoCompletionPort(windows.InvalidHandle, 0, 0, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: CreateIoCompletionPort: %v", ErrUnavailable, err)
	}
	afd, err := openAfd()
	if err != nil {
		windows.CloseHandle(port)
		return nil, fmt.Errorf("%w: open \\Device\\Afd: %v", ErrUnavailable, err)
	}
	if _, err := windows.CreateIoCompletionPort(afd, port, afdKey, 0); err != nil {
		windows.CloseHandle(afd)
		windows.CloseHandle(port)
		return nil, fmt.Errorf("%w: associate AFD handle: %v", ErrUnavailable, err)
	}
	// Nobody waits on the AFD handle itself: skip signalling it.
	windows.SetFileCompletionNotificationModes(afd, windows.FILE_SKIP_SET_EVENT_ON_HANDLE)
	d := &IOCP{port: port, afd: afd, socks: map[int32]*afdSock{}, entries: make([]overlappedEntry, 256)}
	// The kernel keeps a poll record's address between calls. Go's heap
	// does not move objects, so keeping the record reachable (in the op
	// table, or in leakedOps) is what keeps the address valid; the same
	// guarantee internal/poll relies on for its OVERLAPPEDs. No
	// runtime.Pinner: one left pinned by a driver that was never closed
	// would panic from its finalizer, and in a Ruby process that is fatal.
	d.ops = newOpTable(func() *afdPollOp { return new(afdPollOp) })
	return d, nil
}

func openAfd() (windows.Handle, error) {
	var lastErr error
	for _, name := range afdNames {
		us, err := windows.NewNTUnicodeString(name)
		if err != nil {
			return 0, err
		}
		oa := windows.OBJECT_ATTRIBUTES{ObjectName: us, Attributes: windows.OBJ_CASE_INSENSITIVE}
		oa.Length = uint32(unsafe.Sizeof(oa))
		var h windows.Handle
		var iosb windows.IO_STATUS_BLOCK
		err = windows.NtCreateFile(&h, windows.SYNCHRONIZE, &oa, &iosb, nil, 0,
			windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE, windows.FILE_OPEN, 0, 0, 0)
		if err == nil {
			return h, nil
		}
		lastErr = err
	}
	return 0, lastErr
}

func (d *IOCP) Name() string     { return "iocp" }
func (d *IOCP) Persistent() bool { return false }
func (d *IOCP) WakeFD() int      { return -1 }

// baseHandle asks Winsock for the handle of the socket below any layered
// service provider; AFD only knows that one.
func baseHandle(s windows.Handle) (windows.Handle, error) {
	var err error
	for _, code := range []uint32{sioBaseHandle, sioBspHandlePoll} {
		var base windows.Handle
		var n uint32
		err = windows.WSAIoctl(s, code, nil, 0, (*byte)(unsafe.Pointer(&base)),
			uint32(unsafe.Sizeof(base)), &n, nil, 0)
		if err == nil && base != 0 && base != windows.InvalidHandle {
			return base, nil
		}
		if errors.Is(err, wsaeNotSock) {
			return 0, ErrNotPollable
		}
	}
	if err == nil {
		err = ErrNotPollable
	}
	return 0, err
}

func (d *IOCP) Arm(fd int, seq uint32, events Events) error {
	if fd <= 0 || fd > math.MaxInt32 {
		return windows.ERROR_INVALID_HANDLE
	}
	events &= RubyMask
	s := d.socks[int32(fd)]
	if s == nil || s.seq != seq {
		base, err := baseHandle(windows.Handle(fd))
		if err != nil {
			return err
		}
		if s != nil {
			d.detach(s) // a new owner of the number: forget the old one
		}
		s = &afdSock{fd: int32(fd), base: base, seq: seq}
		d.socks[int32(fd)] = s
	}
	s.want |= events
	if s.op != 0 {
		if s.want&^s.opEvents == 0 {
			return nil // the poll in flight already covers it
		}
		d.cancelPoll(s) // completion resubmits with the union
		return nil
	}
	if err := d.submitPoll(s); err != nil {
		d.detach(s)
		// Some Winsock implementations (wine's) hand out a "base handle"
		// for any handle; AFD then refuses what is not a socket.
		if errors.Is(err, windows.STATUS_OBJECT_TYPE_MISMATCH) {
			return ErrNotPollable
		}
		return err
	}
	return nil
}

func (d *IOCP) submitPoll(s *afdSock) error {
	id, op := d.ops.prepare()
	op.sock = s
	// The kernel overwrites this when the poll completes, before it queues
	// the packet: a packet that finds it still pending is not genuine.
	op.iosb = windows.IO_STATUS_BLOCK{Status: windows.STATUS_PENDING}
	op.info = afdPollInfo{
		Timeout:         math.MaxInt64, // no timeout: Wait has its own
		NumberOfHandles: 1,
		Handles:         [1]afdPollHandleInfo{{Handle: s.base, Events: eventsToAfd(s.want)}},
	}
	if err := d.ops.submit(id); err != nil {
		return err
	}
	size := uint32(unsafe.Sizeof(op.info))
	st := ntDeviceIoControlFile(d.afd, uintptr(id), &op.iosb, ioctlAfdPoll,
		unsafe.Pointer(&op.info), size, unsafe.Pointer(&op.info), size)
	if st != statusSuccess && st != windows.STATUS_PENDING {
		// Refused synchronously: no packet will come.
		op.sock = nil
		d.ops.failed(id)
		return fmt.Errorf("IOCTL_AFD_POLL(socket %d): %w", s.fd, st)
	}
	s.op, s.opEvents = id, s.want
	return nil
}

func (d *IOCP) cancelPoll(s *afdSock) {
	id := s.op
	if id == 0 || !d.ops.cancel(id) {
		return
	}
	p, _, _ := d.peek(id)
	if p != nil {
		// CancelIoEx takes the IO_STATUS_BLOCK address for requests
		// started with Nt* calls (an OVERLAPPED begins with one). An error
		// means the poll already completed: its packet is on its way.
		windows.CancelIoEx(d.afd, (*windows.Overlapped)(unsafe.Pointer(&p.iosb)))
	}
}

// peek returns the record of a live operation without changing its state.
func (d *IOCP) peek(id opID) (*afdPollOp, opState, bool) {
	s, ok := d.ops.lookup(id)
	if !ok {
		return nil, opFree, false
	}
	return s.payload, s.state, true
}

// detach forgets s: its poll, if any, is cancelled and its completion will
// be dropped.
func (d *IOCP) detach(s *afdSock) {
	if d.socks[s.fd] == s {
		delete(d.socks, s.fd)
	}
	s.want = 0
	if s.op != 0 {
		if p, _, ok := d.peek(s.op); ok {
			p.sock = nil
		}
		d.cancelPoll(s)
		s.op = 0
	}
}

func (d *IOCP) Disarm(fd int) error {
	if s := d.socks[int32(fd)]; s != nil {
		d.detach(s)
	}
	return nil
}

func (d *IOCP) Wait(buf []Event, timeout time.Duration) (int, error) {
	max := len(buf)
	if max > len(d.entries) {
		max = len(d.entries)
	}
	if max == 0 {
		return 0, nil
	}
	ms := uint32(infiniteTimeout)
	if timeout >= 0 {
		ms = uint32(timeoutMillis(timeout))
	}
	got, err := getQueuedCompletionStatusEx(d.port, d.entries[:max], ms)
	if err != nil {
		if errors.Is(err, waitTimeout) {
			return 0, nil
		}
		return 0, err
	}
	n := 0
	for i := 0; i < got; i++ {
		e := &d.entries[i]
		switch e.Key {
		case wakeKey:
			d.wakePending.Store(0)
		case afdKey:
			if d.forged(opID(e.Overlapped)) {
				d.strays++
				continue
			}
			if ev, ok := d.pollDone(opID(e.Overlapped)); ok {
				buf[n] = ev
				n++
			}
		default:
			d.strays++
		}
	}
	return n, nil
}

// forged tells whether a packet names a poll in flight whose status the
// kernel has not yet written: someone posted it with PostQueuedCompletionStatus.
// Taking it for the real completion would hand the poll's memory back while
// the kernel still owns it.
func (d *IOCP) forged(id opID) bool {
	p, st, ok := d.peek(id)
	return ok && st == opSubmitted && p.iosb.Status == windows.STATUS_PENDING
}

// pollDone handles the completion packet of a poll, and reports whether it
// produced an Event.
func (d *IOCP) pollDone(id opID) (Event, bool) {
	op, _, v := d.ops.complete(id)
	if v != opOK {
		d.strays++
		return Event{}, false
	}
	s := op.sock
	status, info := op.iosb.Status, op.info
	op.sock = nil
	d.ops.retire(id) // the kernel is done with op: reusable from here
	if s == nil || s.op != id {
		return Event{}, false // owner disarmed meanwhile
	}
	s.op = 0
	var ev Events
	switch {
	case status == windows.STATUS_CANCELLED:
	case status != statusSuccess:
		ev = Readable | Writable | Hangup // e.g. the socket was closed
	case info.NumberOfHandles > 0:
		ev = afdToEvents(info.Handles[0].Events)
	}
	if ev&(s.want|Hangup) == 0 {
		// Cancelled to widen the poll, or woken for nothing we want now.
		if s.want != 0 {
			if err := d.submitPoll(s); err != nil {
				ev = Readable | Writable | Hangup // let the waiter find out
			} else {
				return Event{}, false
			}
		} else {
			return Event{}, false
		}
	}
	s.want = 0 // one-shot
	return Event{FD: s.fd, Seq: s.seq, Events: ev}, true
}

func (d *IOCP) Wake() error {
	if !d.wakePending.CompareAndSwap(0, 1) {
		return nil // a wakeup is already queued: as good as ours
	}
	if err := windows.PostQueuedCompletionStatus(d.port, 0, wakeKey, nil); err != nil {
		d.wakePending.Store(0)
		return err
	}
	return nil
}

// Close cancels every poll in flight and reaps their completions for up to
// closeDrainTimeout; the records of polls still not completed then are
// leaked on purpose, as the kernel may write them later.
func (d *IOCP) Close() error {
	if d.port == 0 {
		return nil
	}
	for _, s := range d.socks {
		d.detach(s)
	}
	d.ops.eachSubmitted(func(id opID, _ *afdPollOp) {
		if d.ops.cancel(id) {
			p, _, _ := d.peek(id)
			windows.CancelIoEx(d.afd, (*windows.Overlapped)(unsafe.Pointer(&p.iosb)))
		}
	})
	deadline := time.Now().Add(closeDrainTimeout)
	for d.ops.inFlight() > 0 {
		left := time.Until(deadline)
		if left <= 0 {
			break
		}
		got, err := getQueuedCompletionStatusEx(d.port, d.entries, uint32(timeoutMillis(left)))
		if err != nil {
			if errors.Is(err, waitTimeout) {
				continue
			}
			break
		}
		for i := 0; i < got; i++ {
			if e := &d.entries[i]; e.Key == afdKey && !d.forged(opID(e.Overlapped)) {
				if _, _, v := d.ops.complete(opID(e.Overlapped)); v == opOK {
					d.ops.retire(opID(e.Overlapped))
				}
			}
		}
	}
	if d.ops.inFlight() > 0 {
		leakedOps.Lock()
		d.ops.abandon(func(p *afdPollOp) { leakedOps.ops = append(leakedOps.ops, p) })
		leakedOps.Unlock()
	}
	err := windows.CloseHandle(d.afd)
	if err2 := windows.CloseHandle(d.port); err == nil {
		err = err2
	}
	d.afd, d.port = 0, 0
	return err
}
