//go:build unix

package sched

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/farce-rb/farce/internal/driver"
)

// ---------------------------------------------------------------- fuzz descriptors

// The state machine fuzzer waits on real descriptors (WaitFD with KnownNothing
// probes the kernel) whose readiness never changes: the read ends of three
// empty pipes (probe: nothing), the write end of an empty pipe (probe:
// writable) and the read end of a pipe whose writer is closed (probe:
// hang-up). The fake driver reports the third one as not pollable. The
// descriptors live as long as the process.
const (
	fzEmpty0 = iota
	fzEmpty1
	fzNotPollable
	fzWritable
	fzHungUp
	fzCount
)

var (
	fuzzFDsOnce sync.Once
	fuzzFDs     [fzCount]int
	fuzzFDsErr  error
)

func fuzzDescriptors(tb testing.TB) [fzCount]int {
	fuzzFDsOnce.Do(func() {
		var p [4][2]int
		for i := range p {
			if err := unix.Pipe(p[i][:]); err != nil {
				fuzzFDsErr = err
				return
			}
			unix.SetNonblock(p[i][0], true)
			unix.SetNonblock(p[i][1], true)
		}
		unix.Close(p[3][1])
		fuzzFDs = [fzCount]int{p[0][0], p[1][0], p[2][0], p[0][1], p[3][0]}
	})
	if fuzzFDsErr != nil {
		tb.Fatal(fuzzFDsErr)
	}
	return fuzzFDs
}

// probeModel is what driver.Probe answers for each fuzz descriptor.
func probeModel(idx int, ev Events) Events {
	switch idx {
	case fzWritable:
		return ev & W
	case fzHungUp:
		return R | W | H
	}
	return 0
}

// ---------------------------------------------------------------- reference model

type mState uint8

const (
	mParked mState = iota
	mReady
	mDelivered
	mGone // cancelled, or delivered and freed
)

type mWait struct {
	tok      Token
	fd       int // -1: not a descriptor wait
	interest Events
	timed    bool
	deadline int64
	yield    bool
	state    mState
	result   int64
	woken    bool // Wake returned true for it
	fdReady  bool // finished by a descriptor event
}

type mFD struct {
	seq        uint32
	file       uint64 // the file SetFDFile was last told (0: none since the start or a forget)
	registered bool
	armed      Events
	pollNo     bool
	ready      Events
	notReady   Events
	hangup     bool
	waiters    []*mWait
}

type mEntry struct {
	w     *mWait
	group int
}

type model struct {
	persistent bool
	fds        [fzCount]int
	now        int64
	waits      map[Token]*mWait
	issued     []Token
	queue      []mEntry
	group      int
	delivered  []*mWait
	tableLen   int
	fdState    map[int]*mFD
	registered int
	completed  uint64
	iterations uint64
	batches    [][]driver.Event // mirrors the fake driver's script
	// The open file behind each fuzz descriptor's number, as the kernel
	// sees it: 0 until a reuse or dup2 step switches it behind the
	// scheduler's back; nextFile numbers the new files.
	kfile    map[int]uint64
	switched map[int]bool // the number's file changed since the start
	nextFile uint64
}

// fileKnown: the scheduler was told the file the number names now (or the
// number never changed files), so its registration must be on that file.
func (m *model) fileKnown(fd int) bool {
	return !m.switched[fd] || m.fd(fd).file == m.kfile[fd]+1 // told as FileID{Ino: kfile + 1}
}

func (m *model) fd(fd int) *mFD {
	st := m.fdState[fd]
	if st == nil {
		st = &mFD{seq: 1}
		m.fdState[fd] = st
	}
	return st
}

func (m *model) grow(fd int) {
	if fd >= m.tableLen {
		n := m.tableLen * 2
		if n < 64 {
			n = 64
		}
		for n <= fd {
			n *= 2
		}
		m.tableLen = n
	}
}

func (m *model) unlink(w *mWait) {
	if w.fd < 0 {
		return
	}
	st := m.fd(w.fd)
	for k, x := range st.waiters {
		if x == w {
			st.waiters = append(st.waiters[:k], st.waiters[k+1:]...)
			break
		}
	}
}

func (m *model) finish(w *mWait, result int64, group int) {
	m.unlink(w)
	w.state = mReady
	w.result = result
	m.queue = append(m.queue, mEntry{w, group})
}

func (m *model) newGroup() int { m.group++; return m.group }

func (m *model) fire() {
	var due []*mWait
	for _, w := range m.waits {
		if w.state == mParked && w.timed && w.deadline <= m.now {
			due = append(due, w)
		}
	}
	sort.Slice(due, func(a, b int) bool { return due[a].deadline < due[b].deadline })
	g, last := 0, int64(0)
	for k, w := range due {
		if k == 0 || w.deadline != last {
			g, last = m.newGroup(), w.deadline
		}
		m.finish(w, ResultTimedOut, g)
	}
}

func (m *model) deliver(ev driver.Event) {
	fd := int(ev.FD)
	if fd < 0 || fd >= m.tableLen {
		return
	}
	st := m.fd(fd)
	if st.seq != ev.Seq {
		return
	}
	if !m.persistent && st.armed != 0 {
		st.armed = 0
		m.registered--
	}
	if ev.Events&H != 0 {
		st.hangup = true
	}
	got := ev.Events & driver.RubyMask
	st.notReady &^= got
	var handed, rearm Events
	for _, w := range append([]*mWait(nil), st.waiters...) {
		mm := got & w.interest
		if st.hangup {
			mm = w.interest
		}
		if mm != 0 {
			handed |= mm
			w.fdReady = true
			m.finish(w, int64(mm), m.newGroup())
		} else {
			rearm |= w.interest
		}
	}
	st.ready |= got &^ handed
	if rearm != 0 && !m.persistent {
		m.arm(fd, st, rearm)
	}
}

// arm mirrors the driver registration; it reports false for ErrNotPollable.
func (m *model) arm(fd int, st *mFD, ev Events) bool {
	notPollable := fd == m.fds[fzNotPollable]
	if m.persistent {
		if st.registered {
			return true
		}
		if notPollable {
			return false
		}
		st.registered = true
		m.registered++
		return true
	}
	if st.armed&ev == ev {
		return true
	}
	if notPollable {
		return false
	}
	if st.armed == 0 {
		m.registered++
	}
	st.armed |= ev
	return true
}

func (m *model) stats() Stats {
	st := Stats{ReadyWaits: len(m.queue), RegisteredFDs: m.registered, Iterations: m.iterations, Completed: m.completed}
	for _, w := range m.waits {
		switch w.state {
		case mParked:
			st.PendingWaits++
			if w.timed {
				st.Timers++
			}
		case mReady:
			st.PendingWaits++
		}
	}
	return st
}

func (m *model) expectedTimeout() time.Duration {
	if len(m.queue) > 0 {
		return 0
	}
	found, min := false, int64(0)
	for _, w := range m.waits {
		if w.state == mParked && w.timed && (!found || w.deadline < min) {
			found, min = true, w.deadline
		}
	}
	if !found {
		return -1
	}
	return time.Duration(min - m.now)
}

// ---------------------------------------------------------------- the state machine fuzzer

type fuzzInput struct {
	data []byte
	pos  int
}

func (in *fuzzInput) more() bool { return in.pos < len(in.data) }

func (in *fuzzInput) byte() byte {
	if in.pos >= len(in.data) {
		return 0
	}
	b := in.data[in.pos]
	in.pos++
	return b
}

// timeout decodes a wait timeout: none, sub-millisecond, a few milliseconds
// (with many ties) or practically infinite.
func (in *fuzzInput) timeout() time.Duration {
	b := in.byte()
	switch {
	case b < 64:
		return -1
	case b < 96:
		return time.Duration(b - 64) // nanoseconds
	case b < 250:
		return time.Duration(b%16) * time.Millisecond
	}
	return math.MaxInt64
}

type runner struct {
	t     testing.TB
	m     *model
	s     *Scheduler
	drv   *fakeDriver
	clock *fakeClock

	pending     []driver.Event
	waitAdvance time.Duration
}

func (r *runner) failf(format string, args ...any) {
	r.t.Helper()
	r.t.Fatalf(format, args...)
}

func (r *runner) pick(in *fuzzInput) Token {
	a := in.byte()
	if a < 200 && len(r.m.issued) > 0 {
		return r.m.issued[len(r.m.issued)-1-int(a)%len(r.m.issued)]
	}
	return makeToken(uint32(a%8), uint32(a/8%4))
}

// issue records a new token after checking it is fresh and its slot free.
func (r *runner) issue(tok Token, w *mWait) {
	r.t.Helper()
	if tok == 0 {
		r.failf("zero token issued")
	}
	if _, seen := r.m.waits[tok]; seen {
		r.failf("token %v issued twice", tok)
	}
	for _, x := range r.m.waits {
		if x.tok.Slot() == tok.Slot() && (x.state == mParked || x.state == mReady || x.state == mDelivered) {
			r.failf("token %v reuses the slot of live token %v (state %d)", tok, x.tok, x.state)
		}
	}
	w.tok = tok
	r.m.waits[tok] = w
	r.m.issued = append(r.m.issued, tok)
}

func (r *runner) park(timeout time.Duration) {
	tok, err := r.s.Park(timeout)
	if err != nil {
		r.failf("Park: %v", err)
	}
	w := &mWait{fd: -1, state: mParked}
	if timeout >= 0 {
		w.timed = true
		w.deadline = r.m.now + int64(timeout)
		if w.deadline < r.m.now {
			w.deadline = math.MaxInt64
		}
	}
	r.issue(tok, w)
}

func (r *runner) yield() {
	tok, err := r.s.Yield()
	if err != nil {
		r.failf("Yield: %v", err)
	}
	w := &mWait{fd: -1, yield: true}
	r.issue(tok, w)
	r.m.finish(w, ResultWoken, r.m.newGroup())
}

func (r *runner) wake(tok Token) {
	w := r.m.waits[tok]
	want := w != nil && w.state == mParked && w.fd < 0
	if got := r.s.Wake(tok); got != want {
		r.failf("Wake(%v) = %v, want %v", tok, got, want)
	}
	if want {
		w.woken = true
		r.m.finish(w, ResultWoken, r.m.newGroup())
	}
}

func (r *runner) cancel(tok Token) {
	w := r.m.waits[tok]
	want := w != nil && (w.state == mParked || w.state == mReady)
	if got := r.s.Cancel(tok); got != want {
		r.failf("Cancel(%v) = %v, want %v", tok, got, want)
	}
	if !want {
		return
	}
	if w.state == mParked {
		r.m.unlink(w)
	} else {
		for k, e := range r.m.queue {
			if e.w == w {
				r.m.queue = append(r.m.queue[:k], r.m.queue[k+1:]...)
				break
			}
		}
	}
	w.state = mGone
}

func (r *runner) waitFD(idx int, ev Events, known Readiness, timeout time.Duration) {
	fd := r.m.fds[idx]
	if r.m.fd(fd).file == 0 {
		// the first IO to present a number (or the first after a forget)
		// tells which file it names, before it waits (fd_table.c)
		r.setFile(idx)
	}
	tok, got, err := r.s.WaitFD(fd, ev, timeout, known)
	ev &= driver.RubyMask
	fail := func(format string, args ...any) {
		r.t.Helper()
		r.failf("WaitFD(fd#%d, %v, known %d): "+format, append([]any{idx, ev, known}, args...)...)
	}
	expectReady := func(want Events) {
		r.t.Helper()
		if err != nil || tok != 0 || got != want {
			fail("= (%v, %v, %v), want ready %v", tok, got, err, want)
		}
	}
	if ev == 0 {
		if err == nil {
			fail("no error for empty events")
		}
		return
	}
	m := r.m
	m.grow(fd)
	st := m.fd(fd)
	if st.pollNo {
		expectReady(ev)
		return
	}
	if st.hangup {
		// a hint: re-probed, kept only while the kernel still reports it
		if probeModel(idx, ev) != 0 {
			expectReady(ev)
			return
		}
		st.hangup = false
		if m.persistent && st.registered {
			st.registered = false
			m.registered--
		}
	}
	if timeout == 0 && known == KnownNothing {
		// a zero timeout asks the kernel, whatever the edges said
		p := probeModel(idx, ev)
		if p&H != 0 {
			expectReady(ev)
			return
		}
		if p != 0 {
			st.notReady &^= p
			expectReady(p)
			return
		}
		known = KnownNotReady // found empty: as a read that failed
	}
	switch known {
	case KnownNotReady:
		st.ready &^= ev
		st.notReady |= ev
	case KnownDrained, KnownNothing:
		if g := st.ready & ev; g != 0 {
			st.ready &^= g
			expectReady(g)
			return
		}
		if known == KnownNothing && st.notReady&ev != ev {
			p := probeModel(idx, ev)
			if p&H != 0 {
				expectReady(ev)
				return
			}
			if p != 0 {
				st.notReady &^= p
				expectReady(p)
				return
			}
		}
		st.notReady |= ev
	default:
		if err == nil {
			fail("no error for invalid readiness")
		}
		return
	}
	if !m.arm(fd, st, ev) {
		st.pollNo = true
		expectReady(ev)
		return
	}
	if err != nil || tok == 0 || got != 0 {
		fail("= (%v, %v, %v), want a parked wait", tok, got, err)
	}
	w := &mWait{fd: fd, interest: ev, state: mParked}
	if timeout >= 0 {
		w.timed = true
		w.deadline = m.now + int64(timeout)
		if w.deadline < m.now {
			w.deadline = math.MaxInt64
		}
	}
	r.issue(tok, w)
	st.waiters = append(st.waiters, w)
}

func (r *runner) forget(idx int) {
	fd := r.m.fds[idx]
	if err := r.s.ForgetFD(fd); err != nil {
		r.failf("ForgetFD: %v", err)
	}
	if fd >= r.m.tableLen {
		return
	}
	r.modelForget(fd)
}

// modelForget is ForgetFD in the model.
func (r *runner) modelForget(fd int) {
	m := r.m
	st := m.fd(fd)
	for len(st.waiters) > 0 {
		m.finish(st.waiters[0], ResultClosed, m.newGroup())
	}
	if st.registered || st.armed != 0 {
		m.registered--
	}
	seq := st.seq + 1
	if seq == ^uint32(0) {
		seq = 1
	}
	*st = mFD{seq: seq}
}

// setFile is another IO presenting the number: the scheduler is told which
// file it names now. A change drops everything known of the old file.
func (r *runner) setFile(idx int) {
	fd := r.m.fds[idx]
	file := r.m.kfile[fd] + 1 // FileID's Ino; never zero, which means "not known"
	changed, err := r.s.SetFDFile(fd, FileID{Ino: file})
	if err != nil {
		r.failf("SetFDFile: %v", err)
	}
	m := r.m
	m.grow(fd)
	st := m.fd(fd)
	want := st.file != 0 && st.file != file
	if changed != want {
		r.failf("SetFDFile(fd#%d, %d) = %v, want %v (was %d)", idx, file, changed, want, st.file)
	}
	if want {
		r.modelForget(fd)
		st = m.fd(fd)
	}
	st.file = file
}

// switchFile puts another open file behind the number without telling the
// scheduler: close(2) and reuse (keepOld false: the old file is gone) or
// dup2(2) over it (keepOld: another reference keeps it open).
func (r *runner) switchFile(idx int, keepOld bool) {
	fd := r.m.fds[idx]
	r.m.nextFile++
	r.m.kfile[fd] = r.m.nextFile
	r.m.switched[fd] = true
	r.drv.SwitchFile(fd, r.m.nextFile+1, keepOld) // the fake's file ids are the FileIDs told
	if r.m.kfile[fd]+1 != r.drv.files[fd] {
		r.failf("file ids out of step")
	}
}

// lingeringEvent: the kernel posts an event for a registration whose file
// left the number and lives on (epoll keeps it until the file's last
// reference goes, tagged with its old seq).
func (r *runner) lingeringEvent(pick byte, ev Events) {
	if len(r.pending) >= 128 {
		return
	}
	if e, ok := r.drv.Lingering(int(pick), ev); ok {
		r.pending = append(r.pending, e)
	}
}

func (r *runner) queueEvent(idx int, ev Events, seqMode byte) {
	if len(r.pending) >= 128 {
		return
	}
	fd := r.m.fds[idx]
	seq := r.m.fd(fd).seq
	switch seqMode % 4 {
	case 1:
		seq-- // the previous owner (or 0, never valid)
	case 2:
		seq++ // not issued yet
	}
	r.pending = append(r.pending, driver.Event{FD: int32(fd), Seq: seq, Events: ev})
}

// checkDrained compares completions with the model's ready queue. Waits
// finished together with equal deadlines may come out in any order.
func (r *runner) checkDrained(out []Completion, budget int) {
	m := r.m
	for _, c := range out {
		w := m.waits[c.Token]
		if w == nil {
			r.failf("delivered unknown token %v (stale generation?)", c.Token)
		}
		if w.state != mReady {
			r.failf("delivered token %v in model state %d (twice, or cancelled?)", c.Token, w.state)
		}
		if len(m.queue) == 0 {
			r.failf("delivered %v but the model has nothing ready", c.Token)
		}
		g, k := m.queue[0].group, -1
		for j := 0; j < len(m.queue) && m.queue[j].group == g; j++ {
			if m.queue[j].w == w {
				k = j
				break
			}
		}
		if k < 0 {
			r.failf("delivered %v out of order; model head is %v", c.Token, m.queue[0].w.tok)
		}
		m.queue = append(m.queue[:k], m.queue[k+1:]...)
		if c.Result != w.result {
			r.failf("token %v result %d, want %d", c.Token, c.Result, w.result)
		}
		switch {
		case c.Result == ResultTimedOut:
			if !w.timed || w.deadline > m.now {
				r.failf("token %v timed out early (deadline %d, now %d, timed %v)", c.Token, w.deadline, m.now, w.timed)
			}
		case c.Result == ResultClosed:
			if w.fd < 0 {
				r.failf("token %v closed but not a descriptor wait", c.Token)
			}
		case w.fd < 0:
			if c.Result != ResultWoken || !w.woken && !w.yield {
				r.failf("token %v result %d without Wake", c.Token, c.Result)
			}
		default: // descriptor waits carry the ready events (Readable == ResultWoken)
			if c.Result <= 0 || !w.fdReady || Events(c.Result)&^w.interest != 0 {
				r.failf("token %v got events %v it did not wait for", c.Token, Events(c.Result))
			}
		}
		w.state = mDelivered
		m.delivered = append(m.delivered, w)
		m.completed++
	}
	if len(out) < budget && len(m.queue) > 0 {
		r.failf("Drain returned %d < %d but %d waits are ready", len(out), budget, len(m.queue))
	}
}

func (r *runner) poll(block bool, budget int, eintr bool) {
	m := r.m
	if len(r.pending) > 0 {
		r.drv.Script(r.pending...)
		m.batches = append(m.batches, r.pending)
		r.pending = nil
	}
	if eintr {
		r.drv.waitErr = append(r.drv.waitErr, unix.EINTR)
	}
	adv := r.waitAdvance
	r.waitAdvance = 0
	r.drv.onWait = func(time.Duration) { r.clock.Advance(adv) }

	// BeginPoll
	for _, w := range m.delivered {
		w.state = mGone
	}
	m.delivered = m.delivered[:0]
	m.iterations++
	if block {
		m.fire()
	}
	want := m.expectedTimeout()
	if !block {
		want = 0
	}
	waits := r.drv.waits
	out := make([]Completion, budget)
	limit := time.Duration(-1)
	if !block {
		limit = 0
	}
	n, err := r.s.Poll(out, limit, nil)
	if r.drv.waits != waits+1 {
		r.failf("Poll did not call Wait once")
	}
	if got := r.drv.timeouts[len(r.drv.timeouts)-1]; got != want {
		r.failf("Wait timeout %v, want %v", got, want)
	}
	// Wait
	m.now += int64(adv)
	if !block {
		// A poll that cannot block reads the clock once, after the
		// driver: the timers due by then are queued ahead of its events.
		m.fire()
	}
	var evs []driver.Event
	if eintr {
		if !errors.Is(err, unix.EINTR) {
			r.failf("Poll error %v, want EINTR", err)
		}
	} else {
		if err != nil {
			r.failf("Poll: %v", err)
		}
		if len(m.batches) > 0 {
			evs = m.batches[0]
			m.batches = m.batches[1:]
		}
	}
	// EndPoll
	for _, ev := range evs {
		m.deliver(ev)
	}
	m.fire()
	r.checkDrained(out[:n], budget)
}

func (r *runner) drain(budget int) {
	out := make([]Completion, budget)
	n := r.s.Drain(out)
	r.checkDrained(out[:n], budget)
}

func (r *runner) check(step int, op string) {
	r.t.Helper()
	if err := r.s.checkInvariants(); err != nil {
		r.failf("step %d (%s): invariant: %v", step, op, err)
	}
	if got, want := r.s.Stats(), r.m.stats(); got != want {
		r.failf("step %d (%s): Stats %+v, model %+v", step, op, got, want)
	}
	if r.s.Now() != r.m.now {
		r.failf("clock drift")
	}
	// The fake driver watches what the scheduler thinks it does. Once the
	// scheduler knows which file a number names, what it armed must be
	// armed on that file: a registration the kernel dropped with the old
	// file, or a one-shot arm still pinning it, would be a wait that never
	// hears of the new file (a lost wakeup).
	for fd, st := range r.m.fdState {
		if !r.m.fileKnown(fd) {
			continue // switched behind its back and not told yet: nobody can know
		}
		a, ok := r.drv.armed[fd]
		onFile := ok && a.file == r.drv.files[fd]
		if r.m.persistent && st.registered && (!onFile || a.seq != st.seq) {
			r.failf("step %d (%s): fd %d registered with seq %d on file %d, driver has %+v (ok %v)", step, op, fd, st.seq, r.drv.files[fd], a, ok)
		}
		if !r.m.persistent && st.armed != 0 && (!onFile || a.seq != st.seq || st.armed&^a.events != 0) {
			r.failf("step %d (%s): fd %d armed %v seq %d on file %d, driver has %+v (ok %v)", step, op, fd, st.armed, st.seq, r.drv.files[fd], a, ok)
		}
	}
}

func runStateMachine(t testing.TB, data []byte) {
	fds := fuzzDescriptors(t)
	in := &fuzzInput{data: data}
	persistent := in.byte()&1 == 0
	clock := &fakeClock{now: 1_000_000_000}
	drv := newFakeDriver(persistent)
	drv.notPollable[fds[fzNotPollable]] = true
	r := &runner{
		t: t, drv: drv, clock: clock,
		s: New(drv, clock.Now),
		m: &model{
			persistent: persistent, fds: fds, now: clock.now, waits: map[Token]*mWait{}, fdState: map[int]*mFD{},
			kfile: map[int]uint64{}, switched: map[int]bool{},
		},
	}
	for _, fd := range fds {
		drv.files[fd] = 1 // kfile 0, told as FileID{Ino: 1}
	}
	defer func() {
		if err := r.s.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := r.s.Poll(make([]Completion, 1), 0, nil); !errors.Is(err, ErrClosed) {
			t.Fatalf("Poll after Close: %v", err)
		}
	}()
	for step := 0; in.more() && step < 4096; step++ {
		op := in.byte() % 20
		var name string
		switch op {
		case 0:
			name = "park"
			r.park(-1)
		case 1:
			name = "park-timeout"
			r.park(in.timeout())
		case 2:
			name = "yield"
			r.yield()
		case 3:
			name = "wake"
			r.wake(r.pick(in))
		case 4:
			name = "cancel"
			r.cancel(r.pick(in))
		case 5, 6, 15:
			name = "waitfd"
			a, b := in.byte(), in.byte()
			known := Readiness(b % 3)
			if b == 255 {
				known = Readiness(7)
			}
			ev := Events(a>>3) % 16 // includes 0 and the Hangup bit
			r.waitFD(int(a)%fzCount, ev, known, in.timeout())
		case 7, 8:
			name = "event"
			a, b := in.byte(), in.byte()
			r.queueEvent(int(a)%fzCount, Events(b%16), a>>4)
		case 9:
			name = "forget"
			r.forget(int(in.byte()) % fzCount)
		case 10:
			name = "advance"
			b := in.byte()
			d := time.Duration(b%8) * time.Millisecond
			if b >= 128 {
				d = time.Duration(b - 128)
			}
			r.clock.Advance(d)
			r.m.now += int64(d)
		case 11, 12:
			name = "poll"
			b := in.byte()
			r.poll(b&1 == 1, 1+int(b>>1)%8, false)
		case 13:
			name = "drain"
			r.drain(1 + int(in.byte())%4)
		case 14:
			b := in.byte()
			if b&1 == 0 {
				name = "poll-eintr"
				r.poll(true, 1+int(b>>1)%8, true)
			} else {
				name = "advance-in-wait"
				r.waitAdvance = time.Duration(b>>1) * time.Millisecond / 4
			}
		case 16:
			// close(2) behind the scheduler's back, the number reused by a
			// new file (libmariadb's reconnect); or dup2(2) over it, the old
			// file kept open by another reference
			b := in.byte()
			keep := b&1 == 1
			name = map[bool]string{false: "reuse", true: "dup2"}[keep]
			r.switchFile(int(b>>1)%fzCount, keep)
		case 17:
			name = "another-io"
			r.setFile(int(in.byte()) % fzCount)
		case 18:
			name = "lingering-event"
			a, b := in.byte(), in.byte()
			r.lingeringEvent(a, Events(b%16))
		case 19:
			// the same IO object waits on (mysql2 after a Timeout; no check)
			name = "waitfd-same-io"
			a := in.byte()
			r.waitFD(int(a)%fzCount, R, KnownNotReady, -1)
		}
		r.check(step, name)
	}
}

func stateMachineSeeds() [][]byte {
	return [][]byte{
		{},
		{0},
		{1},
		// park, park with timeout, yield, wake the first, poll, advance, poll
		{0, 0, 1, 200, 2, 3, 2, 11, 17, 10, 7, 11, 16, 11, 16},
		// one-shot: two waits on one fd, an event for one, poll, forget, poll
		{1, 5, 0x08, 1, 10, 5, 0x20, 1, 10, 7, 0, 1, 11, 15, 9, 0, 11, 15},
		// persistent: wait, cancel it, event cached, KnownDrained wait ready at once
		{0, 5, 0x08, 1, 10, 4, 0, 7, 0, 1, 11, 15, 5, 0x08, 2, 10},
		// KnownNothing waits on every descriptor
		{0, 5, 0x08, 0, 10, 5, 0x09, 0, 10, 5, 0x0a, 0, 10, 5, 0x23, 0, 10, 5, 0x0c, 0, 10, 11, 15},
		// stale events after forget, hang-up, many timers with ties
		{1, 5, 0x08, 1, 100, 7, 0x10, 1, 9, 0, 7, 0x00, 0xf, 11, 15, 1, 100, 1, 100, 1, 101, 1, 70, 10, 3, 11, 15, 11, 15},
		// EINTR with clock moving during the wait, huge timeout, drain in small batches
		{0, 1, 255, 1, 110, 2, 2, 2, 14, 200, 14, 0, 13, 0, 13, 1, 11, 3, 4, 0, 3, 1},
		// persistent: a wait on fd#0, its file closed and the number reused
		// behind its back, a new IO's wait on it (told: the old waiter is
		// closed, the new file armed), events on both seqs, poll
		{0, 5, 0x08, 1, 10, 16, 0, 17, 0, 5, 0x08, 1, 10, 7, 0x10, 1, 7, 0, 1, 11, 15},
		// one-shot: the same with dup2 (the old file lingers), a lingering
		// event, the same IO waiting again, poll
		{1, 5, 0x08, 1, 10, 16, 1, 18, 0, 1, 19, 0, 17, 0, 5, 0x08, 1, 10, 18, 1, 1, 11, 15},
		// persistent: dup2 with a parked waiter, a lingering event before
		// and after the new IO's wait, forget, reuse again
		{0, 5, 0x08, 1, 10, 19, 0, 16, 1, 18, 0, 1, 11, 15, 17, 0, 19, 0, 18, 0, 1, 11, 15, 9, 0, 16, 0, 17, 0, 11, 15},
	}
}

func FuzzStateMachine(f *testing.F) {
	for _, s := range stateMachineSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		runStateMachine(t, data)
	})
}

// TestStateMachineSeeds runs the seeds and a deterministic pseudo-random
// sweep so that plain `go test` exercises the model too.
func TestStateMachineSeeds(t *testing.T) {
	for i, s := range stateMachineSeeds() {
		t.Run(fmt.Sprint("seed", i), func(t *testing.T) { runStateMachine(t, s) })
	}
	x := uint64(0x9e3779b97f4a7c15)
	for i := 0; i < 300; i++ {
		data := make([]byte, 50+i*3)
		for k := range data {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			data[k] = byte(x)
		}
		runStateMachine(t, data)
		if t.Failed() {
			return
		}
	}
}

// ---------------------------------------------------------------- the timer heap alone

func checkHeap(h *timerHeap) error {
	for k, i := range h.items {
		if int(h.slots.slots[i].heapIdx) != k {
			return fmt.Errorf("heap[%d] = slot %d with heapIdx %d", k, i, h.slots.slots[i].heapIdx)
		}
		if k > 0 && h.slots.slots[h.items[(k-1)/2]].deadline > h.slots.slots[i].deadline {
			return fmt.Errorf("heap order broken at %d", k)
		}
	}
	return nil
}

func FuzzTimerHeap(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 5, 0, 3, 0, 9, 2, 2, 2})
	f.Add([]byte{0, 1, 0, 1, 0, 1, 1, 0, 1, 1, 2, 0, 7, 2, 2})
	f.Add([]byte{0, 200, 0, 100, 0, 150, 0, 100, 1, 2, 1, 0, 2, 2, 2, 2})
	f.Fuzz(func(t *testing.T, data []byte) {
		var st slotTable
		h := timerHeap{slots: &st}
		live := map[uint32]int64{} // slot -> deadline
		var order []uint32         // live slots in insertion order, for picking
		for p := 0; p+1 < len(data); p += 2 {
			op, arg := data[p]%3, data[p+1]
			switch op {
			case 0: // push
				i, sl := st.alloc()
				sl.deadline = int64(arg % 32) // plenty of ties
				h.push(i)
				live[i] = sl.deadline
				order = append(order, i)
			case 1: // remove an arbitrary live timer
				if len(order) == 0 {
					if len(st.slots) > 0 {
						h.remove(0) // harmless for a slot that is not in the heap
					}
					continue
				}
				k := int(arg) % len(order)
				i := order[k]
				order = append(order[:k], order[k+1:]...)
				h.remove(i)
				if st.slots[i].heapIdx != -1 {
					t.Fatalf("removed slot %d keeps heapIdx %d", i, st.slots[i].heapIdx)
				}
				h.remove(i) // a second remove is a no-op
				delete(live, i)
				st.release(i)
			case 2: // pop the minimum
				i, ok := h.peek()
				if ok != (len(live) > 0) {
					t.Fatalf("peek ok=%v with %d live", ok, len(live))
				}
				if !ok {
					continue
				}
				for _, d := range live {
					if d < live[i] {
						t.Fatalf("peek gave deadline %d but %d is live", live[i], d)
					}
				}
				h.remove(i)
				delete(live, i)
				for k, x := range order {
					if x == i {
						order = append(order[:k], order[k+1:]...)
						break
					}
				}
				st.release(i)
			}
			if h.len() != len(live) {
				t.Fatalf("heap has %d items, %d live", h.len(), len(live))
			}
			if err := checkHeap(&h); err != nil {
				t.Fatal(err)
			}
		}
		// Draining yields non-decreasing deadlines.
		last := int64(-1)
		for h.len() > 0 {
			i, _ := h.peek()
			if st.slots[i].deadline < last {
				t.Fatalf("pop order: %d after %d", st.slots[i].deadline, last)
			}
			last = st.slots[i].deadline
			h.remove(i)
			if err := checkHeap(&h); err != nil {
				t.Fatal(err)
			}
		}
	})
}
