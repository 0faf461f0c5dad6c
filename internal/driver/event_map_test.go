package driver

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// One table of what the kernel can report about a descriptor, and the
// Events every driver must turn it into. Each driver's mapping from its own
// kernel flags (epoll, poll, kqueue, AFD) is checked against the same table,
// so that POLLHUP and friends mean the same to the scheduler whatever the
// backend: a hang-up or an error is readable, writable and Hangup at once
// (whichever direction waits retries its call and sees the cause).

// kernelReport is a backend-neutral description of one readiness report.
type kernelReport struct {
	readable, priority, writable bool
	hangup                       bool // peer gone, descriptor hung up
	err                          bool // error pending on the descriptor
	readHangup                   bool // peer shut down its writing side only
}

// kernelBits names one driver's flag for each part of a report; 0 where its
// kernel interface has none.
type kernelBits struct{ readable, priority, writable, hangup, err, readHangup uint32 }

// encode is the driver's flags for r; ok is false when a part of r has no flag.
func (b kernelBits) encode(r kernelReport) (m uint32, ok bool) {
	for _, part := range []struct {
		set  bool
		flag uint32
	}{{r.readable, b.readable}, {r.priority, b.priority}, {r.writable, b.writable},
		{r.hangup, b.hangup}, {r.err, b.err}, {r.readHangup, b.readHangup}} {
		if part.set && part.flag == 0 {
			return 0, false
		}
		if part.set {
			m |= part.flag
		}
	}
	return m, true
}

// eventMapper maps a report through one driver's flags. ok is false when the
// driver's kernel interface cannot express the report.
type eventMapper struct {
	name string
	mapf func(r kernelReport) (ev Events, ok bool)
}

var eventMapCases = []struct {
	name   string
	report kernelReport
	want   Events
}{
	{"nothing", kernelReport{}, 0},
	{"readable", kernelReport{readable: true}, Readable},
	{"priority", kernelReport{priority: true}, Priority},
	{"writable", kernelReport{writable: true}, Writable},
	{"readable and writable", kernelReport{readable: true, writable: true}, Readable | Writable},
	{"hang-up", kernelReport{hangup: true}, Readable | Writable | Hangup},
	{"hang-up with data left", kernelReport{readable: true, hangup: true}, Readable | Writable | Hangup},
	{"error", kernelReport{err: true}, Readable | Writable | Hangup},
	{"error while writable", kernelReport{writable: true, err: true}, Readable | Writable | Hangup},
	{"peer shut down writing", kernelReport{readable: true, readHangup: true}, Readable | ReadHangup},
}

// Mappers of the drivers whose mapping is pure data (tested everywhere);
// the unix and Linux test files add poll and epoll.
var eventMappers = []eventMapper{
	{"kqueue", func(r kernelReport) (Events, bool) {
		if r.priority || r.readHangup {
			return 0, false // no priority filter; EV_EOF does not tell a half close from a hang-up
		}
		var ev Events
		trouble := r.hangup || r.err
		if r.readable || trouble {
			ev |= kqueueEvents(kqRaw{filter: kqRead, eof: r.hangup, err: r.err})
		}
		if r.writable || trouble {
			ev |= kqueueEvents(kqRaw{filter: kqWrite, eof: r.hangup, err: r.err})
		}
		return ev, true
	}},
	{"afd", func(r kernelReport) (Events, bool) {
		// AFD_POLL_DISCONNECT is its only FIN report: no half close
		m, ok := kernelBits{afdPollReceive, afdPollReceiveExpedited, afdPollSend, afdPollDisconnect, afdPollAbort, 0}.encode(r)
		return afdToEvents(m), ok
	}},
}

func TestEventMappingIsTheSameForEveryDriver(t *testing.T) {
	for _, m := range eventMappers {
		expressed := 0
		for _, c := range eventMapCases {
			got, ok := m.mapf(c.report)
			if !ok {
				continue
			}
			expressed++
			assert.Equal(t, c.want, got, "%s: %s", m.name, c.name)
		}
		assert.Greater(t, expressed, len(eventMapCases)/2, "%s expresses too few of the cases to be checked", m.name)
	}
}
