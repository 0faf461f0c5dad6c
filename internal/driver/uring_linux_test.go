//go:build linux

package driver

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// uringOrSkip creates a driver on a thread pinned for the test, or skips
// when this host cannot set up a ring.
func uringOrSkip(t *testing.T, want string, multi bool) *URing {
	t.Helper()
	runtime.LockOSThread()
	t.Cleanup(runtime.UnlockOSThread)
	u, err := newURing(want, multi)
	if err != nil {
		if errors.Is(err, ErrUnavailable) {
			t.Skipf("io_uring unavailable here: %v", err)
		}
		require.NoError(t, err)
	}
	t.Cleanup(func() { u.Close() })
	t.Logf("ring: %s", describeRing(u))
	return u
}

func uringCtor(want string, multi bool, noExt bool) func() (Driver, error) {
	return func() (Driver, error) {
		uringForceNoExtArg = noExt
		defer func() { uringForceNoExtArg = false }()
		u, err := newURing(want, multi)
		if err != nil {
			return nil, err
		}
		return u, nil
	}
}

// The conformance suite for the variants constructors() does not name.
func TestURingConformanceVariants(t *testing.T) {
	for _, v := range []struct {
		name  string
		want  string
		multi bool
		noExt bool
	}{
		{"multishot", "defer", true, false},
		{"coop", "coop", false, false},
		{"coop-multishot", "coop", true, false},
		{"plain", "plain", false, false},
		{"plain-multishot", "plain", true, false},
		{"timeout-sqe", "defer", false, true},
		{"timeout-sqe-multishot", "defer", true, true},
	} {
		t.Run(v.name, func(t *testing.T) { runConformance(t, uringCtor(v.want, v.multi, v.noExt)) })
	}
}

func TestURingUserData(t *testing.T) {
	for _, c := range []struct {
		kind uint8
		gen  uint32
		fd   int32
	}{{udPoll, 1, 0}, {udPoll, genMask, 1<<30 - 1}, {udWake, 0, 7}, {udRemove, 0, 0}, {udTimeout, 5, -1}} {
		ud := makeUD(c.kind, c.gen, c.fd)
		k, g, fd := splitUD(ud)
		assert.Equal(t, c.kind, k)
		assert.Equal(t, c.gen, g)
		assert.Equal(t, c.fd, fd)
	}
	// Generations wrap within 24 bits and skip 0 (0 means "no request").
	u := &URing{nextGen: genMask - 1}
	assert.Equal(t, uint32(genMask), u.gen())
	assert.Equal(t, uint32(1), u.gen())
	_, g, _ := splitUD(makeUD(udPoll, genMask+1, 3))
	assert.Equal(t, uint32(0), g, "generation is masked, never leaks into kind")
}

// Flag probing: each EINVAL moves one tier down.
func TestURingSetupFallback(t *testing.T) {
	real := uringSetupSyscall
	t.Cleanup(func() { uringSetupSyscall = real })
	for _, c := range []struct {
		refuse uint32 // flags the fake "old kernel" does not know
		want   string
		has    uint32
		hasnt  uint32
	}{
		{0, "defer", uringSetupDeferTaskrun | uringSetupSingleIssuer, 0},
		{uringSetupTaskrunFlag, "defer", uringSetupDeferTaskrun, uringSetupTaskrunFlag},
		{uringSetupDeferTaskrun, "coop", uringSetupCoopTaskrun | uringSetupSingleIssuer | uringSetupTaskrunFlag, uringSetupDeferTaskrun},
		{uringSetupDeferTaskrun | uringSetupSingleIssuer, "coop", uringSetupCoopTaskrun, uringSetupSingleIssuer},
		{uringSetupDeferTaskrun | uringSetupSingleIssuer | uringSetupTaskrunFlag, "coop", uringSetupCoopTaskrun, uringSetupTaskrunFlag},
		{uringSetupDeferTaskrun | uringSetupCoopTaskrun, "plain", uringSetupSubmitAll, uringSetupCoopTaskrun},
		{uringSetupDeferTaskrun | uringSetupCoopTaskrun | uringSetupSubmitAll, "plain", 0, uringSetupSubmitAll},
	} {
		var tried []uint32
		uringSetupSyscall = func(n uint32, p *uringParams) (int, error) {
			tried = append(tried, p.Flags)
			if p.Flags&c.refuse != 0 {
				return -1, unix.EINVAL
			}
			return real(n, p)
		}
		ring, info, err := newRing("defer")
		if err != nil && errors.Is(err, ErrUnavailable) && len(tried) == 1 {
			t.Skipf("io_uring unavailable here: %v", err)
		}
		require.NoError(t, err, "refusing %#x", c.refuse)
		ring.close()
		assert.Equal(t, c.has, info.setup&c.has, "refusing %#x got %s", c.refuse, info)
		assert.Zero(t, info.setup&c.hasnt, "refusing %#x got %s", c.refuse, info)
		assert.Equal(t, info.setup&(uringSetupCoopTaskrun|uringSetupDeferTaskrun) == 0 || info.setup&uringSetupTaskrunFlag != 0, info.cheapPeek)
	}
	// A tier cap starts lower.
	uringSetupSyscall = real
	ring, info, err := newRing("plain")
	if err == nil {
		ring.close()
		assert.Zero(t, info.setup&(uringSetupCoopTaskrun|uringSetupDeferTaskrun|uringSetupSingleIssuer))
	}
	// Every tier refused: "ring setup failed" with the errno.
	uringSetupSyscall = func(uint32, *uringParams) (int, error) { return -1, unix.EINVAL }
	_, _, err = newRing("defer")
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrUnavailable)
	assert.Contains(t, err.Error(), "ring setup failed")
	assert.Contains(t, err.Error(), "EINVAL")
}

func TestURingForcedFailures(t *testing.T) {
	env := map[string]string{}
	uringGetenv = func(k string) string { return env[k] }
	t.Cleanup(func() { uringGetenv = os.Getenv })
	for force, want := range map[string]string{
		"enosys":   "kernel is too old or built without io_uring (io_uring_setup: ENOSYS)",
		"eperm":    "io_uring_setup returned EPERM (a seccomp filter",
		"disabled": "/proc/sys/kernel/io_uring_disabled is 2 (disabled for every process)",
		"setup":    "io_uring ring setup failed: invalid argument (EINVAL)",
	} {
		t.Run(force, func(t *testing.T) {
			env[envForceError] = force
			env[envAuto] = "1"
			_, err := NewURing()
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrUnavailable)
			assert.Contains(t, err.Error(), want)
			_, _, err = Open("io_uring")
			assert.ErrorIs(t, err, ErrUnavailable)
			{
				d, reason, err := Open("auto")
				require.NoError(t, err)
				defer d.Close()
				assert.Equal(t, "epoll", d.Name())
				assert.Contains(t, reason, want)
				assert.Contains(t, reason, "using epoll")
			}
		})
	}
	env[envForceError] = ""
	env[envAuto] = ""
	d, reason, err := Open("auto")
	require.NoError(t, err)
	d.Close()
	// Where io_uring cannot be set up at all (an old kernel, a seccomp
	// filter, or qemu-user, which answers io_uring_setup with ENOSYS), auto
	// is epoll; when it tried io_uring first, it says why it fell back.
	if u, uerr := NewURing(); uerr != nil {
		require.ErrorIs(t, uerr, ErrUnavailable)
		assert.Equal(t, "epoll", d.Name(), "auto without io_uring")
		if uringFirstByDefault {
			assert.Contains(t, reason, "using epoll")
		} else {
			assert.Empty(t, reason)
		}
	} else {
		u.Close()
		assert.Equal(t, uringFirstByDefault, d.Name() == "io_uring", "auto without FARCE_IO_URING_AUTO")
		assert.Empty(t, reason)
	}
	env[envPoll] = "sideways"
	_, err = NewURing()
	assert.ErrorContains(t, err, envPoll)
	env[envPoll] = ""
	env[envSetup] = "turbo"
	_, err = NewURing()
	assert.ErrorContains(t, err, envSetup)
}

// EPERM is explained by the sysctl when it is set.
func TestURingEPERMReadsSysctl(t *testing.T) {
	path := filepath.Join(t.TempDir(), "io_uring_disabled")
	uringSysctlPath = path
	t.Cleanup(func() { uringSysctlPath = "/proc/sys/kernel/io_uring_disabled" })
	for v, want := range map[string]string{
		"0\n": "seccomp filter",
		"1\n": "io_uring_disabled is 1 (allowed only for processes in kernel.io_uring_group)",
		"2\n": "io_uring_disabled is 2 (disabled for every process)",
	} {
		require.NoError(t, os.WriteFile(path, []byte(v), 0o644))
		assert.Contains(t, uringFailure(unix.EPERM).Error(), want)
	}
	os.Remove(path)
	assert.Contains(t, uringFailure(unix.EPERM).Error(), "seccomp filter")
	assert.Contains(t, uringFailure(unix.ENOMEM).Error(), "ring setup failed: cannot allocate memory (ENOMEM)")
}

// Wait(0) must see readiness that arrived while the loop ran Ruby code,
// whether or not it needed a system call to learn of it.
func TestURingPollOnlySeesReadiness(t *testing.T) {
	for _, want := range []string{"defer", "coop", "plain"} {
		for _, multi := range []bool{false, true} {
			u := uringOrSkip(t, want, multi)
			a, b := newStreamPair(t)
			require.NoError(t, u.Arm(a.FD(), 1, Readable))
			buf := make([]Event, 4)
			n, err := u.Wait(buf, 0) // submits the arm
			require.NoError(t, err)
			for _, ev := range buf[:n] { // multishot reports writability at once
				assert.Zero(t, ev.Events&Readable, "readable before any data")
			}
			b.Write(t, []byte("x"))
			deadline := time.Now().Add(2 * time.Second)
			got := false
			for !got && time.Now().Before(deadline) {
				n, err := u.Wait(buf, 0)
				require.NoError(t, err)
				for _, ev := range buf[:n] {
					got = got || (int(ev.FD) == a.FD() && ev.Events&Readable != 0)
				}
			}
			assert.True(t, got, "%s multishot=%v: Wait(0) never saw the readable edge", want, multi)
		}
	}
}

// Stale completions (a Disarm'd or superseded request) are dropped and never
// reported under the new owner's seq.
func TestURingStaleDropped(t *testing.T) {
	for _, multi := range []bool{false, true} {
		u := uringOrSkip(t, "defer", multi)
		a, b := newStreamPair(t)
		b.Write(t, []byte("x")) // readable from the start
		require.NoError(t, u.Arm(a.FD(), 1, Readable))
		require.NoError(t, u.Disarm(a.FD()))
		// Both SQEs go in one submission: the poll completes (ready) before
		// the removal runs, with a generation that is no longer current.
		buf := make([]Event, 8)
		n, err := u.Wait(buf, 0)
		require.NoError(t, err)
		for _, ev := range buf[:n] {
			assert.NotEqual(t, int32(a.FD()), ev.FD, "event for a disarmed descriptor: %+v", ev)
		}
		require.NoError(t, u.Arm(a.FD(), 2, Readable))
		ev, ok := waitFor(t, u, a.FD(), 2, Readable, Readable, 2*time.Second)
		require.True(t, ok)
		assert.Equal(t, uint32(2), ev.Seq)
		assert.Positive(t, u.wasted, "the stale completion was not seen (and dropped)")
	}
}

// A one-shot request is widened (removed and re-added for the union).
func TestURingWiden(t *testing.T) {
	u := uringOrSkip(t, "defer", false)
	a, b := newStreamPair(t)
	require.NoError(t, u.Arm(a.FD(), 4, Readable))
	n, err := u.Wait(make([]Event, 4), 0)
	require.NoError(t, err)
	require.Zero(t, n)
	require.NoError(t, u.Arm(a.FD(), 4, Writable))
	ev, ok := waitFor(t, u, a.FD(), 4, Readable|Writable, Writable, 2*time.Second)
	require.True(t, ok)
	assert.Equal(t, uint32(4), ev.Seq)
	_ = b
}

// With SINGLE_ISSUER a ring entered from another thread fails with EEXIST;
// the driver rebuilds its ring on the new thread and keeps its requests.
func TestURingThreadChange(t *testing.T) {
	for _, multi := range []bool{false, true} {
		u := uringOrSkip(t, "defer", multi)
		if u.info.setup&uringSetupSingleIssuer == 0 {
			t.Skip("no SINGLE_ISSUER here")
		}
		a, b := newStreamPair(t)
		require.NoError(t, u.Arm(a.FD(), 3, Readable))
		_, err := u.Wait(make([]Event, 4), 0)
		require.NoError(t, err)
		done := make(chan struct{})
		go func() {
			defer close(done)
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			b.Write(t, []byte("x"))
			ev, ok := waitFor(t, u, a.FD(), 3, Readable, Readable, 2*time.Second)
			assert.True(t, ok, "event lost across the ring rebuild: %+v", ev)
			assert.Equal(t, uint32(3), ev.Seq)
		}()
		<-done
		assert.Equal(t, 1, u.rebuilt)
	}
}

// Documents the io_uring property that makes multishot polls unsafe with a
// extension that forgets descriptors lazily: a poll request holds the open file,
// so closing the descriptor does not close the socket (no EOF for the peer)
// until the request is removed.
func TestURingPollPinsFile(t *testing.T) {
	u := uringOrSkip(t, "defer", true)
	a, b := newStreamPair(t)
	fd := a.FD()
	require.NoError(t, u.Arm(fd, 1, Readable))
	buf := make([]Event, 4)
	// the first Wait(0) with nothing to report leaves the submission to the
	// caller's next Wait (see Wait); the second submits
	for i := 0; i < 2; i++ {
		_, err := u.Wait(buf, 0)
		require.NoError(t, err)
	}
	a.Close(t)
	var one [1]byte
	_, err := unix.Read(b.FD(), one[:])
	assert.Equal(t, unix.EAGAIN, err, "peer saw EOF although a poll pins the socket")
	require.NoError(t, u.Disarm(fd))
	for i := 0; i < 2; i++ {
		_, err = u.Wait(buf, 0)
		require.NoError(t, err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		n, err := unix.Read(b.FD(), one[:])
		if n == 0 && err == nil {
			break // EOF: the removal released the file
		}
		require.True(t, time.Now().Before(deadline), "no EOF after Disarm: %v", err)
		time.Sleep(time.Millisecond)
	}
}

// describeRing describes the ring a driver obtained, for the tests' logs.
func describeRing(u *URing) string { return u.info.String() + fmt.Sprintf(" multishot=%v", u.multi) }

// The no-syscall path: a Wait(0) with nothing queued and nothing flagged
// does not enter the kernel; after a wakeup it reports n == 0 quickly.
func TestURingInfoAndName(t *testing.T) {
	u := uringOrSkip(t, "defer", false)
	assert.Equal(t, "io_uring", u.Name())
	assert.False(t, u.Persistent())
	assert.True(t, strings.Contains(describeRing(u), "setup="))
}

// One Wait(0) reports every descriptor that became ready, not the few the
// kernel completes per enter on a DEFER_TASKRUN ring (since Linux 6.11 an
// enter that waits for nothing runs about 20 deferred completions and
// leaves the rest flagged): the rest would wait for the next poll, a whole
// batch of fibers later (the slowest requests of 1,000 HTTP connections
// took 100+ ms). On older kernels and other tiers it holds trivially.
func TestURingOneWaitReportsEveryReadyDescriptor(t *testing.T) {
	for _, c := range []struct {
		want    string
		timeout time.Duration
	}{{"defer", 0}, {"defer", time.Second}, {"coop", 0}, {"plain", 0}} {
		want := c.want
		u := uringOrSkip(t, want, false)
		const count = 100
		readers := make([]int, count)
		var writers []*endpoint
		for i := range readers {
			a, b := newStreamPair(t)
			readers[i] = a.FD()
			writers = append(writers, b)
			require.NoError(t, u.Arm(a.FD(), uint32(i+1), Readable))
		}
		buf := make([]Event, 256)
		for i := 0; i < 2; i++ { // the first may leave the arms for the next Wait (batching)
			n, err := u.Wait(buf, 0)
			require.NoError(t, err)
			require.Zero(t, n, "readable before any data")
		}
		for _, w := range writers {
			w.Write(t, []byte("x"))
		}
		n, err := u.Wait(buf, c.timeout)
		require.NoError(t, err)
		assert.Equal(t, count, n, "%s: one Wait(%v) after %d descriptors became readable", want, c.timeout, count)
	}
}
