//go:build linux

package driver

// The io_uring ABI (include/uapi/linux/io_uring.h), the part this driver
// uses, over raw system calls: golang.org/x/sys has the syscall numbers but
// no io_uring types. No liburing, no cgo.

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// io_uring_setup flags.
const (
	uringSetupCQSize       = 1 << 3
	uringSetupClamp        = 1 << 4
	uringSetupSubmitAll    = 1 << 7
	uringSetupCoopTaskrun  = 1 << 8
	uringSetupTaskrunFlag  = 1 << 9
	uringSetupSingleIssuer = 1 << 12
	uringSetupDeferTaskrun = 1 << 13
)

// io_uring_params.features.
const (
	uringFeatSingleMmap = 1 << 0
	uringFeatNoDrop     = 1 << 1
	uringFeatFastPoll   = 1 << 5
	uringFeatExtArg     = 1 << 8
)

// io_uring_enter flags.
const (
	uringEnterGetEvents = 1 << 0
	uringEnterExtArg    = 1 << 3
)

// Shared SQ ring flags (sq_off.flags).
const (
	uringSQCQOverflow = 1 << 1
	uringSQTaskrun    = 1 << 2
)

// CQE flags.
const uringCQEFMore = 1 << 1

// SQE flags: IOSQE_ASYNC (Linux 5.6; every kernel with FEAT_FAST_POLL, which
// operations need) sends the operation to the kernel's worker threads.
const uringSQEAsync = 1 << 4

// Opcodes.
const (
	uringOpNop         = 0
	uringOpPollAdd     = 6
	uringOpPollRemove  = 7
	uringOpTimeout     = 11
	uringOpAsyncCancel = 14
	uringOpRead        = 22
	uringOpWrite       = 23
)

// POLL_ADD flags (sqe.len).
const uringPollAddMulti = 1 << 0

// io_uring_register opcodes.
const uringRegisterProbe = 8

// mmap offsets.
const (
	uringOffSQRing = 0
	uringOffCQRing = 0x8000000
	uringOffSQEs   = 0x10000000
)

type uringSQOffsets struct {
	Head, Tail, RingMask, RingEntries, Flags, Dropped, Array, Resv1 uint32
	UserAddr                                                        uint64
}

type uringCQOffsets struct {
	Head, Tail, RingMask, RingEntries, Overflow, CQEs, Flags, Resv1 uint32
	UserAddr                                                        uint64
}

type uringParams struct {
	SQEntries, CQEntries, Flags, SQThreadCPU, SQThreadIdle, Features, WQFd uint32
	Resv                                                                   [3]uint32
	SQOff                                                                  uringSQOffsets
	CQOff                                                                  uringCQOffsets
}

// uringSQE is struct io_uring_sqe (64 bytes).
type uringSQE struct {
	Opcode      uint8
	Flags       uint8
	Ioprio      uint16
	Fd          int32
	Off         uint64
	Addr        uint64
	Len         uint32
	OpFlags     uint32 // poll32_events, timeout_flags, ...
	UserData    uint64
	BufIndex    uint16
	Personality uint16
	SpliceFdIn  int32
	Addr3       uint64
	Pad2        uint64
}

// uringCQE is struct io_uring_cqe (16 bytes).
type uringCQE struct {
	UserData uint64
	Res      int32
	Flags    uint32
}

// uringGeteventsArg is struct io_uring_getevents_arg.
type uringGeteventsArg struct {
	Sigmask   uint64
	SigmaskSz uint32
	MinWait   uint32
	Ts        uint64
}

type uringProbeOp struct {
	Op    uint8
	Resv  uint8
	Flags uint16
	Resv2 uint32
}

type uringProbe struct {
	LastOp uint8
	OpsLen uint8
	Resv   uint16
	Resv2  [3]uint32
	Ops    [256]uringProbeOp
}

const uringOpSupported = 1 << 0

func init() {
	// The layout is the kernel ABI: fail loudly at start-up, not in the ring.
	if unsafe.Sizeof(uringSQE{}) != 64 || unsafe.Sizeof(uringCQE{}) != 16 ||
		unsafe.Sizeof(uringParams{}) != 120 || unsafe.Sizeof(uringGeteventsArg{}) != 24 {
		panic("farce: io_uring ABI struct sizes are wrong for this platform")
	}
}

func uringSetup(entries uint32, p *uringParams) (int, error) {
	fd, _, e := unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(p)), 0)
	if e != 0 {
		return -1, e
	}
	return int(fd), nil
}

func uringEnter(fd int, toSubmit, minComplete, flags uint32, arg unsafe.Pointer, argSize uintptr) (int, error) {
	if minComplete == 0 {
		// Never blocks (submits and runs completion work only): skip the
		// scheduler bookkeeping of a blocking system call.
		n, _, e := unix.RawSyscall6(unix.SYS_IO_URING_ENTER, uintptr(fd), uintptr(toSubmit), 0,
			uintptr(flags), uintptr(arg), argSize)
		if e != 0 {
			return int(n), e
		}
		return int(n), nil
	}
	n, _, e := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(fd), uintptr(toSubmit), uintptr(minComplete),
		uintptr(flags), uintptr(arg), argSize)
	if e != 0 {
		return int(n), e
	}
	return int(n), nil
}

func uringRegister(fd int, op uint32, arg unsafe.Pointer, nargs uint32) error {
	_, _, e := unix.Syscall6(unix.SYS_IO_URING_REGISTER, uintptr(fd), uintptr(op), uintptr(arg), uintptr(nargs), 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

// uringRing is one mapped ring: the file descriptor, the shared SQ/CQ ring
// memory and the SQE array.
type uringRing struct {
	fd       int
	params   uringParams
	ringMem  []byte // SQ ring (and CQ ring with FEAT_SINGLE_MMAP)
	cqMem    []byte // separate CQ ring mapping on old kernels, else nil
	sqeMem   []byte
	sqHead   *uint32
	sqTail   *uint32
	sqFlags  *uint32
	sqMask   uint32
	sqes     []uringSQE
	cqHead   *uint32
	cqTail   *uint32
	cqMask   uint32
	cqes     []uringCQE
	tail     uint32 // local SQ tail: SQEs up to it are written, published on submit
	overflow *uint32
}

func u32at(b []byte, off uint32) *uint32 { return (*uint32)(unsafe.Pointer(&b[off])) }

// mapRing maps the rings of a freshly set-up ring fd.
func mapRing(fd int, p *uringParams) (*uringRing, error) {
	r := &uringRing{fd: fd, params: *p}
	sqSize := int(p.SQOff.Array + p.SQEntries*4)
	cqSize := int(p.CQOff.CQEs + p.CQEntries*uint32(unsafe.Sizeof(uringCQE{})))
	single := p.Features&uringFeatSingleMmap != 0
	if single && cqSize > sqSize {
		sqSize = cqSize
	}
	var err error
	r.ringMem, err = unix.Mmap(fd, uringOffSQRing, sqSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return nil, fmt.Errorf("mmap SQ ring: %w", err)
	}
	cq := r.ringMem
	if !single {
		r.cqMem, err = unix.Mmap(fd, uringOffCQRing, cqSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
		if err != nil {
			r.unmap()
			return nil, fmt.Errorf("mmap CQ ring: %w", err)
		}
		cq = r.cqMem
	}
	sqeSize := int(p.SQEntries) * int(unsafe.Sizeof(uringSQE{}))
	r.sqeMem, err = unix.Mmap(fd, uringOffSQEs, sqeSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		r.unmap()
		return nil, fmt.Errorf("mmap SQEs: %w", err)
	}
	r.sqHead = u32at(r.ringMem, p.SQOff.Head)
	r.sqTail = u32at(r.ringMem, p.SQOff.Tail)
	r.sqFlags = u32at(r.ringMem, p.SQOff.Flags)
	r.sqMask = *u32at(r.ringMem, p.SQOff.RingMask)
	r.sqes = unsafe.Slice((*uringSQE)(unsafe.Pointer(&r.sqeMem[0])), p.SQEntries)
	// The SQ index array maps ring slot i to SQE i, once and for all.
	array := unsafe.Slice((*uint32)(unsafe.Pointer(&r.ringMem[p.SQOff.Array])), p.SQEntries)
	for i := range array {
		array[i] = uint32(i)
	}
	r.cqHead = u32at(cq, p.CQOff.Head)
	r.cqTail = u32at(cq, p.CQOff.Tail)
	r.cqMask = *u32at(cq, p.CQOff.RingMask)
	r.overflow = u32at(cq, p.CQOff.Overflow)
	r.cqes = unsafe.Slice((*uringCQE)(unsafe.Pointer(&cq[p.CQOff.CQEs])), p.CQEntries)
	r.tail = atomic.LoadUint32(r.sqTail)
	return r, nil
}

func (r *uringRing) unmap() {
	for _, m := range [][]byte{r.sqeMem, r.cqMem, r.ringMem} {
		if m != nil {
			unix.Munmap(m)
		}
	}
	r.sqeMem, r.cqMem, r.ringMem = nil, nil, nil
}

func (r *uringRing) close() error {
	r.unmap()
	err := unix.Close(r.fd)
	r.fd = -1
	return err
}

// sqSpace is how many SQEs can still be written.
func (r *uringRing) sqSpace() uint32 {
	return uint32(len(r.sqes)) - (r.tail - atomic.LoadUint32(r.sqHead))
}

// getSQE returns the next free SQE, zeroed, or nil when the SQ is full.
func (r *uringRing) getSQE() *uringSQE {
	if r.sqSpace() == 0 {
		return nil
	}
	sqe := &r.sqes[r.tail&r.sqMask]
	*sqe = uringSQE{}
	r.tail++
	return sqe
}

// sqeAt is the SQE that getSQE handed out when r.tail was pos+1.
func (r *uringRing) sqeAt(pos uint32) *uringSQE { return &r.sqes[pos&r.sqMask] }

// publish makes written SQEs visible to the kernel and returns how many it
// has not consumed yet.
func (r *uringRing) publish() uint32 {
	atomic.StoreUint32(r.sqTail, r.tail)
	return r.tail - atomic.LoadUint32(r.sqHead)
}

func (r *uringRing) flags() uint32 { return atomic.LoadUint32(r.sqFlags) }
