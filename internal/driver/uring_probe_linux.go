//go:build linux

package driver

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Environment variables read by the Go side when an io_uring driver is
// created (Go sees the environment as it was when the core library was
// loaded, i.e. at the process's first Farce::Scheduler.new: set them before
// that, or in a child process):
//
//	FARCE_IO_URING_FORCE_ERROR=enosys|eperm|disabled|setup
//	    make ring creation fail as if the kernel had no io_uring (ENOSYS),
//	    a seccomp filter refused it (EPERM), kernel.io_uring_disabled were 2,
//	    or every ring setup failed (EINVAL); for testing #fallback_reason.
//	FARCE_IO_URING_SETUP=defer|coop|plain
//	    the best setup tier to try (default defer): defer = SINGLE_ISSUER +
//	    DEFER_TASKRUN, coop = SINGLE_ISSUER + COOP_TASKRUN, plain = neither.
//	FARCE_IO_URING_POLL=oneshot|multishot
//	    poll mode (default oneshot; see URing).
//	FARCE_IO_URING_OPS=0|1
//	    completion operations (IORING_OP_READ/WRITE for the extension's io_read
//	    and io_write); see uringOpsByDefault for the default.
//	FARCE_IO_URING_AUTO=0|1
//	    whether backend "auto" tries io_uring before epoll (default yes;
//	    see open_linux.go).
const (
	envAuto       = "FARCE_IO_URING_AUTO"
	envForceError = "FARCE_IO_URING_FORCE_ERROR"
	envSetup      = "FARCE_IO_URING_SETUP"
	envPoll       = "FARCE_IO_URING_POLL"
	envOps        = "FARCE_IO_URING_OPS"
)

// Test hooks.
var (
	uringGetenv        = os.Getenv
	uringSysctlPath    = "/proc/sys/kernel/io_uring_disabled"
	uringSetupSyscall  = uringSetup
	uringForceNoExtArg = false
)

const (
	uringEntries   = 256
	uringCQEntries = 4096
)

// uringTiers are the setup flag sets tried in order; EINVAL moves on to
// the next (an older kernel does not know a flag).
var uringTiers = []struct {
	name  string
	flags uint32
}{
	{"defer", uringSetupSingleIssuer | uringSetupDeferTaskrun | uringSetupTaskrunFlag | uringSetupSubmitAll},
	{"defer", uringSetupSingleIssuer | uringSetupDeferTaskrun | uringSetupSubmitAll},
	{"coop", uringSetupSingleIssuer | uringSetupCoopTaskrun | uringSetupTaskrunFlag | uringSetupSubmitAll},
	{"coop", uringSetupCoopTaskrun | uringSetupTaskrunFlag | uringSetupSubmitAll},
	{"coop", uringSetupCoopTaskrun | uringSetupSubmitAll},
	{"plain", uringSetupSubmitAll},
	{"plain", 0},
}

// uringInfo is what the kernel granted.
type uringInfo struct {
	want      string // best tier allowed (FARCE_IO_URING_SETUP)
	setup     uint32 // flags io_uring_setup accepted (without CQSIZE/CLAMP)
	features  uint32
	multishot bool // IORING_POLL_ADD_MULTI works
	cheapPeek bool // completions reach the CQ without io_uring_enter, or the kernel flags when one is needed
	ops       bool // READ, WRITE and ASYNC_CANCEL are supported, with FEAT_FAST_POLL
}

func (i uringInfo) String() string {
	var f []string
	for _, b := range []struct {
		bit  uint32
		name string
	}{
		{uringSetupSingleIssuer, "SINGLE_ISSUER"}, {uringSetupDeferTaskrun, "DEFER_TASKRUN"},
		{uringSetupCoopTaskrun, "COOP_TASKRUN"}, {uringSetupTaskrunFlag, "TASKRUN_FLAG"},
		{uringSetupSubmitAll, "SUBMIT_ALL"},
	} {
		if i.setup&b.bit != 0 {
			f = append(f, b.name)
		}
	}
	ext := i.features&uringFeatExtArg != 0
	return fmt.Sprintf("setup=%s ext_arg=%v nodrop=%v", strings.Join(f, "|"), ext, i.features&uringFeatNoDrop != 0)
}

// UringSetupError is why a ring could not be created; Reason is the
// fallback reason Open("auto") reports.
type UringSetupError struct {
	Errno  unix.Errno
	Reason string
}

func (e *UringSetupError) Error() string { return e.Reason }
func (e *UringSetupError) Unwrap() []error {
	return []error{ErrUnavailable, e.Errno}
}

// newRing creates and maps a ring with the best setup flags the kernel
// accepts, not above tier want.
func newRing(want string) (*uringRing, uringInfo, error) {
	force := strings.ToLower(uringGetenv(envForceError))
	switch force {
	case "enosys":
		return nil, uringInfo{}, uringFailure(unix.ENOSYS)
	case "eperm":
		return nil, uringInfo{}, uringFailure(unix.EPERM)
	case "disabled":
		return nil, uringInfo{}, uringDisabledFailure("2")
	}
	started := false
	var lastErr error
	for _, tier := range uringTiers {
		if !started && tier.name != want {
			continue
		}
		started = true
		p := uringParams{Flags: tier.flags | uringSetupCQSize | uringSetupClamp, CQEntries: uringCQEntries}
		var fd int
		var err error
		if force == "setup" {
			fd, err = -1, unix.EINVAL
		} else {
			fd, err = uringSetupSyscall(uringEntries, &p)
		}
		if err == unix.EINVAL {
			lastErr = err
			continue
		}
		if err != nil {
			return nil, uringInfo{}, uringFailure(err.(unix.Errno))
		}
		ring, err := mapRing(fd, &p)
		if err != nil {
			unix.Close(fd)
			return nil, uringInfo{}, &UringSetupError{Errno: unix.ENOMEM, Reason: "io_uring ring setup failed: " + err.Error()}
		}
		info := uringInfo{want: want, setup: tier.flags, features: p.Features}
		if uringForceNoExtArg {
			info.features &^= uringFeatExtArg
		}
		info.cheapPeek = tier.flags&uringSetupTaskrunFlag != 0 ||
			tier.flags&(uringSetupCoopTaskrun|uringSetupDeferTaskrun) == 0
		ops, err := probeOps(fd)
		if err != nil {
			ring.close()
			return nil, uringInfo{}, err
		}
		info.ops = ops && p.Features&uringFeatFastPoll != 0
		return ring, info, nil
	}
	if lastErr == nil {
		lastErr = unix.EINVAL
	}
	return nil, uringInfo{}, &UringSetupError{Errno: lastErr.(unix.Errno),
		Reason: fmt.Sprintf("io_uring ring setup failed: %v (%s)", lastErr, errnoName(lastErr.(unix.Errno)))}
}

// probeOps checks with IORING_REGISTER_PROBE that the kernel has the
// opcodes this driver submits.
// It also reports whether the completion operations (READ, WRITE,
// ASYNC_CANCEL) are there; without them the driver is readiness-only.
func probeOps(fd int) (ops bool, err error) {
	var pr uringProbe
	if err := uringRegister(fd, uringRegisterProbe, unsafe.Pointer(&pr), uint32(len(pr.Ops))); err != nil {
		return false, &UringSetupError{Errno: err.(unix.Errno),
			Reason: fmt.Sprintf("io_uring kernel too old: IORING_REGISTER_PROBE failed: %v", err)}
	}
	has := func(op uint8) bool { return int(op) <= int(pr.LastOp) && pr.Ops[op].Flags&uringOpSupported != 0 }
	for _, op := range []uint8{uringOpPollAdd, uringOpPollRemove, uringOpTimeout} {
		if !has(op) {
			return false, &UringSetupError{Errno: unix.EOPNOTSUPP,
				Reason: fmt.Sprintf("io_uring kernel too old: opcode %d not supported", op)}
		}
	}
	return has(uringOpRead) && has(uringOpWrite) && has(uringOpAsyncCancel), nil
}

func errnoName(e unix.Errno) string {
	if n := unix.ErrnoName(e); n != "" {
		return n
	}
	return fmt.Sprintf("errno %d", int(e))
}

// uringFailure explains an io_uring_setup error.
func uringFailure(err unix.Errno) error {
	switch err {
	case unix.ENOSYS:
		return &UringSetupError{Errno: err, Reason: "io_uring unavailable: the kernel is too old or built without io_uring (io_uring_setup: ENOSYS)"}
	case unix.EPERM:
		v := "0"
		if b, rerr := os.ReadFile(uringSysctlPath); rerr == nil {
			v = strings.TrimSpace(string(b))
		}
		if v != "0" && v != "" {
			return uringDisabledFailure(v)
		}
		return &UringSetupError{Errno: err, Reason: "io_uring refused: io_uring_setup returned EPERM (a seccomp filter or container policy; kernel.io_uring_disabled is 0)"}
	}
	return &UringSetupError{Errno: err, Reason: fmt.Sprintf("io_uring ring setup failed: %v (%s)", err, errnoName(err))}
}

func uringDisabledFailure(v string) error {
	why := "disabled for every process"
	if v == "1" {
		why = "allowed only for processes in kernel.io_uring_group"
	}
	return &UringSetupError{Errno: unix.EPERM,
		Reason: fmt.Sprintf("io_uring disabled: /proc/sys/kernel/io_uring_disabled is %s (%s), io_uring_setup returned EPERM", v, why)}
}

// NewURing creates the io_uring driver with the poll mode and setup tier
// taken from the environment (see envPoll, envSetup).
func NewURing() (*URing, error) {
	mode := strings.ToLower(uringGetenv(envPoll))
	if mode != "" && mode != "oneshot" && mode != "multishot" {
		return nil, fmt.Errorf("%w: %s=%q (oneshot or multishot)", ErrUnavailable, envPoll, mode)
	}
	want := strings.ToLower(uringGetenv(envSetup))
	if want == "" {
		want = "defer"
	}
	if want != "defer" && want != "coop" && want != "plain" {
		return nil, fmt.Errorf("%w: %s=%q (defer, coop or plain)", ErrUnavailable, envSetup, want)
	}
	u, err := newURing(want, mode == "multishot")
	if err != nil {
		return nil, err
	}
	switch uringGetenv(envOps) {
	case "0":
		u.opsOn = false
	case "1":
		u.opsOn = u.info.ops
	default:
		u.opsOn = u.info.ops && uringOpsByDefault
	}
	return u, nil
}

func newURing(want string, multishot bool) (*URing, error) {
	ring, info, err := newRing(want)
	if err != nil {
		return nil, err
	}
	wfd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		ring.close()
		return nil, fmt.Errorf("%w: eventfd: %v", ErrUnavailable, err)
	}
	u := &URing{ring: ring, info: info, wakefd: wfd, noExt: info.features&uringFeatExtArg == 0}
	if err := u.probeMultishot(); err != nil {
		u.Close()
		return nil, err
	}
	u.multi = multishot && u.info.multishot
	return u, nil
}

// probeMultishot arms the wakeup poll as a multishot poll; a kernel without
// IORING_POLL_ADD_MULTI fails it at once with EINVAL, and it is armed
// one-shot instead (re-armed after each wakeup).
func (u *URing) probeMultishot() error {
	u.info.multishot = true
	for {
		if err := u.armWake(); err != nil {
			return err
		}
		if _, err := u.enter(u.ring.publish(), 0, uringEnterGetEvents); err != nil {
			return &UringSetupError{Errno: errnoOf(err), Reason: fmt.Sprintf("io_uring ring setup failed: first submission: %v", err)}
		}
		r := u.ring
		failed := false
		for head, tail := atomic.LoadUint32(r.cqHead), atomic.LoadUint32(r.cqTail); head != tail; head++ {
			c := r.cqes[head&r.cqMask]
			if kind, _, _ := splitUD(c.UserData); kind == udWake && c.Res < 0 {
				failed = true
				if !u.info.multishot || c.Res != -int32(unix.EINVAL) {
					return &UringSetupError{Errno: unix.Errno(-c.Res),
						Reason: fmt.Sprintf("io_uring ring setup failed: poll on eventfd: %v", unix.Errno(-c.Res))}
				}
			}
		}
		atomic.StoreUint32(r.cqHead, atomic.LoadUint32(r.cqTail))
		if !failed {
			return nil
		}
		u.info.multishot = false
	}
}

func errnoOf(err error) unix.Errno {
	var e unix.Errno
	if errors.As(err, &e) {
		return e
	}
	return unix.EIO
}
