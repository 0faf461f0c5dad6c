package sched

import (
	"fmt"
	"sync"
	"time"

	"github.com/farce-rb/farce/internal/driver"
)

// fakeClock is a manual monotonic clock.
type fakeClock struct{ now int64 }

func (c *fakeClock) Now() int64              { return c.now }
func (c *fakeClock) Advance(d time.Duration) { c.now += int64(d) }

// armCall records one Arm or Disarm.
type armCall struct {
	Disarm bool
	FD     int
	Seq    uint32
	Events driver.Events
}

func (c armCall) String() string {
	if c.Disarm {
		return fmt.Sprintf("disarm(%d)", c.FD)
	}
	return fmt.Sprintf("arm(%d,%d,%v)", c.FD, c.Seq, c.Events)
}

type fakeArm struct {
	seq    uint32
	events driver.Events
	file   uint64 // the open file the number named when it was armed
}

// fakeLinger is a registration whose file left its number but lives on.
type fakeLinger struct {
	fd int
	fakeArm
}

// fakeDriver is a scripted driver.Driver. A persistent fake behaves like
// epoll (one Arm per fd and seq, reported forever); a one-shot fake like
// poll (an Arm is forgotten once reported). Wait returns the scripted
// batches queued with Script, one per call, and records the timeouts it
// was asked for.
type fakeDriver struct {
	persistent bool

	calls []armCall
	armed map[int]fakeArm // current registrations
	// The open file behind each number (0 until a test switches one: the
	// file the number had from the start). A persistent fake keys its
	// registrations by file and number as epoll does: one whose file left
	// the number is dropped with the file's last reference, or lingers in
	// lingering while another reference keeps the file open (and DEL on
	// the number no longer reaches it). A one-shot fake's arm pins its
	// file, as an io_uring poll in flight does, until reported or disarmed.
	files       map[int]uint64
	lingering   []fakeLinger
	notPollable map[int]bool  // Arm fails with ErrNotPollable
	armErr      map[int]error // Arm fails with this error
	script      [][]driver.Event
	waitErr     []error // returned by Wait (one per call) before the script is consulted
	timeouts    []time.Duration
	waits       int
	closed      bool
	closeErr    error
	onWait      func(timeout time.Duration) // runs at the start of Wait

	mu     sync.Mutex
	wakeup bool
}

func newFakeDriver(persistent bool) *fakeDriver {
	return &fakeDriver{
		persistent:  persistent,
		armed:       map[int]fakeArm{},
		files:       map[int]uint64{},
		notPollable: map[int]bool{},
		armErr:      map[int]error{},
	}
}

func (d *fakeDriver) Name() string {
	if d.persistent {
		return "fake-persistent"
	}
	return "fake-oneshot"
}

func (d *fakeDriver) Persistent() bool { return d.persistent }

func (d *fakeDriver) Arm(fd int, seq uint32, events driver.Events) error {
	d.calls = append(d.calls, armCall{FD: fd, Seq: seq, Events: events})
	if d.notPollable[fd] {
		return driver.ErrNotPollable
	}
	if err := d.armErr[fd]; err != nil {
		return err
	}
	cur, ok := d.armed[fd]
	if ok && cur.seq == seq && !d.persistent {
		events |= cur.events
	}
	if ok && d.persistent && cur.file != d.files[fd] {
		d.lingering = append(d.lingering, fakeLinger{fd, cur}) // ADD makes a second (file, number) key
	}
	d.armed[fd] = fakeArm{seq: seq, events: events, file: d.files[fd]}
	return nil
}

func (d *fakeDriver) Disarm(fd int) error {
	d.calls = append(d.calls, armCall{Disarm: true, FD: fd})
	if cur, ok := d.armed[fd]; ok && d.persistent && cur.file != d.files[fd] {
		// EPOLL_CTL_DEL resolves the number to its file now: ENOENT, and
		// the old file's registration stays with that file
		d.lingering = append(d.lingering, fakeLinger{fd, cur})
	}
	delete(d.armed, fd)
	return nil
}

// SwitchFile puts another open file behind fd, behind the scheduler's back
// (close(2) and a reuse of the number, or dup2(2)). keepOld: another
// reference keeps the old file open (a dup, a child, the dup2's source).
func (d *fakeDriver) SwitchFile(fd int, file uint64, keepOld bool) {
	d.files[fd] = file
	cur, ok := d.armed[fd]
	if !ok || !d.persistent || cur.file == file {
		return
	}
	delete(d.armed, fd)
	if keepOld {
		d.lingering = append(d.lingering, fakeLinger{fd, cur})
	}
}

// Lingering is an event the kernel may still post for a registration whose
// file left the number (tagged with its old seq), or false when none lingers.
func (d *fakeDriver) Lingering(pick int, ev driver.Events) (driver.Event, bool) {
	if len(d.lingering) == 0 {
		return driver.Event{}, false
	}
	l := d.lingering[pick%len(d.lingering)]
	return driver.Event{FD: int32(l.fd), Seq: l.seq, Events: ev}, true
}

// Script queues one batch of events for a later Wait.
func (d *fakeDriver) Script(evs ...driver.Event) { d.script = append(d.script, evs) }

// consume applies what a real driver does when it reports ev: a one-shot
// registration is forgotten.
func (d *fakeDriver) consume(ev driver.Event) {
	if d.persistent {
		return
	}
	if cur, ok := d.armed[int(ev.FD)]; ok && cur.seq == ev.Seq {
		delete(d.armed, int(ev.FD))
	}
}

func (d *fakeDriver) Wait(buf []driver.Event, timeout time.Duration) (int, error) {
	d.waits++
	d.timeouts = append(d.timeouts, timeout)
	if d.onWait != nil {
		d.onWait(timeout)
	}
	d.mu.Lock()
	d.wakeup = false
	d.mu.Unlock()
	if len(d.waitErr) > 0 {
		err := d.waitErr[0]
		d.waitErr = d.waitErr[1:]
		if err != nil {
			return 0, err
		}
	}
	if len(d.script) == 0 {
		return 0, nil
	}
	batch := d.script[0]
	d.script = d.script[1:]
	n := copy(buf, batch)
	for _, ev := range batch[:n] {
		d.consume(ev)
	}
	return n, nil
}

func (d *fakeDriver) Wake() error {
	d.mu.Lock()
	d.wakeup = true
	d.mu.Unlock()
	return nil
}

func (d *fakeDriver) WakeFD() int { return -1 }

func (d *fakeDriver) Close() error {
	d.closed = true
	return d.closeErr
}

// arms returns the recorded Arm calls (not Disarms).
func (d *fakeDriver) arms() []armCall {
	var out []armCall
	for _, c := range d.calls {
		if !c.Disarm {
			out = append(out, c)
		}
	}
	return out
}

func (d *fakeDriver) resetCalls() { d.calls = nil }

var _ driver.Driver = (*fakeDriver)(nil)
