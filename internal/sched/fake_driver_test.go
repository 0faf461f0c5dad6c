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
}

// fakeDriver is a scripted driver.Driver. A persistent fake behaves like
// epoll (one Arm per fd and seq, reported forever); a one-shot fake like
// poll (an Arm is forgotten once reported). Wait returns the scripted
// batches queued with Script, one per call, and records the timeouts it
// was asked for.
type fakeDriver struct {
	persistent bool

	calls       []armCall
	armed       map[int]fakeArm // current registrations
	notPollable map[int]bool    // Arm fails with ErrNotPollable
	armErr      map[int]error   // Arm fails with this error
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
	d.armed[fd] = fakeArm{seq: seq, events: events}
	return nil
}

func (d *fakeDriver) Disarm(fd int) error {
	d.calls = append(d.calls, armCall{Disarm: true, FD: fd})
	delete(d.armed, fd)
	return nil
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
