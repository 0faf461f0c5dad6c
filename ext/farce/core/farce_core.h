/*
 * The C ABI between farce's Ruby extension (the C in ext/farce/) and the Go core
 * (libfarce_core.so, built from export.go). Only integers and C memory that
 * the caller keeps alive cross it: no Ruby VALUE ever reaches Go.
 *
 * Every function returns a negative errno-style code on failure; the text of
 * the most recent failure of a handle is available from farce_last_error.
 */
#ifndef FARCE_CORE_H
#define FARCE_CORE_H 1

#include <stdint.h>

/* What farce_core_abi returns; the extension refuses a core that says
 * otherwise. 2: every function below is required (ext/farce/core_door.c). */
#define FARCE_CORE_ABI 4

typedef struct farce_completion {
    uint64_t token;  /* slot in the low 32 bits, generation in the high 32 */
    int64_t result;  /* events (>0), FARCE_RESULT_* */
} farce_completion;

#define FARCE_RESULT_TIMED_OUT 0
#define FARCE_RESULT_WOKEN 1
#define FARCE_RESULT_CLOSED (-1)

/* readiness the caller knows about a descriptor (internal/sched.Readiness) */
#define FARCE_KNOWN_NOTHING 0
#define FARCE_KNOWN_NOT_READY 1
#define FARCE_KNOWN_DRAINED 2

/* completion operations (farce_submit_op) */
#define FARCE_OP_READ 1
#define FARCE_OP_WRITE 2
#define FARCE_OP_PREAD 3
#define FARCE_OP_PWRITE 4
/* or'ed into a kind: the kernel's worker threads perform it (io_uring's
 * IOSQE_ASYNC), never inline in the submitting call (regular files) */
#define FARCE_OP_ASYNC 0x10

/* error codes beyond errno values */
#define FARCE_E_HANDLE 100000   /* unknown or closed scheduler handle */
#define FARCE_E_ARGUMENT 100001 /* invalid argument (message in last_error) */
#define FARCE_E_BACKEND 100002  /* backend unknown or unavailable (message) */
#define FARCE_E_THREAD 100003   /* called from a thread other than the loop's (message) */

/* What the loop's thread publishes about its turns for the stall watchdog
 * (internal/sched.TurnState, same layout). The loop writes seq, started_ns,
 * active and tid with atomic stores; the watchdog (a goroutine, no GVL)
 * writes stall_seq. Allocated by the extension with malloc and handed to
 * the core by farce_stall_watch, which frees it when the handle closes. */
/* A wait started by the next poll (farce_poll_batch) on a reserved token:
 * the fiber parked on it without a call into the core. */
typedef struct farce_fd_wait {
    uint64_t token;  /* handed out in farce_poll_args.reserve */
    int32_t fd;      /* < 0: an untimed park (woken by farce_wake or farce_poll_args.wakes) */
    uint32_t events; /* Ruby's IO::READABLE | IO::PRIORITY | IO::WRITABLE */
    int32_t known;   /* FARCE_KNOWN_* */
    int32_t unused;
} farce_fd_wait;

/* What farce_poll_batch does besides the poll, all under the one call. */
typedef struct farce_poll_args {
    int64_t *resumed;       /* when the last batch's fibers resumed (farce_poll_noting; with FARCE_POLL_WAKEUP_LATENCY) */
    int32_t nresumed;
    int32_t nwaits;         /* waits to start before the poll asks the driver */
    farce_fd_wait *waits;
    uint64_t *reserve;      /* tokens the caller holds for farce_fd_wait: reserve[0..reserved) */
    int32_t reserved;       /* in: how many it holds; out: after the core topped them up */
    int32_t reserve_cap;    /* top up to this many */
    int32_t nwakes;         /* farce_wake for each, after the waits started */
    uint64_t *wakes;
    int32_t flags;          /* FARCE_POLL_* */
    int32_t unused;
    int64_t polled_at;      /* out: CLOCK_MONOTONIC ns at the end of the poll (0: it did not poll) */
} farce_poll_args;

/* farce_poll_args.flags: keep the wake-up latency histogram (farce_stats);
 * without it no wait is stamped and resumed is ignored */
#define FARCE_POLL_WAKEUP_LATENCY 1

typedef struct farce_turn_state {
    int64_t seq;        /* turns begun */
    int64_t started_ns; /* CLOCK_MONOTONIC when the current turn began */
    int64_t active;     /* 1 while a fiber runs, 0 while the loop runs or waits */
    int64_t tid;        /* kernel thread id of the loop's thread */
    int64_t stall_seq;  /* the last turn the watchdog signalled about */
} farce_turn_state;

/* stats slots filled by farce_stats */
enum {
    FARCE_STAT_PENDING_WAITS,
    FARCE_STAT_READY_WAITS,
    FARCE_STAT_TIMERS,
    FARCE_STAT_REGISTERED_FDS,
    FARCE_STAT_ITERATIONS,
    FARCE_STAT_COMPLETED,
    FARCE_STAT_GOROUTINES,
    FARCE_STAT_WAKEUPS,        /* fibers resumed whose wake-up latency was measured */
    FARCE_STAT_WAKEUP_P50_NS,  /* wake-up latency percentiles (ready -> running), ns */
    FARCE_STAT_WAKEUP_P90_NS,
    FARCE_STAT_WAKEUP_P99_NS,
    FARCE_STAT_WAKEUP_MAX_NS,
    FARCE_STAT_KERNEL_CALLS,   /* system calls the driver made (waits, registrations, io_uring_enter) */
    FARCE_STAT_URING_ENTERS,   /* of which io_uring_enter */
    FARCE_STAT_COUNT
};

#endif
