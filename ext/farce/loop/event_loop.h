/*
 * The loop: what both Ruby front ends of the Go core share.
 *
 * farce has two Ruby faces over one Go core: Farce::Scheduler
 * (fiber_scheduler.c, Ruby's Fiber::Scheduler interface, fibers are resumed
 * and yield back) and Farce::IOEventSelector (io_event_selector.c,
 * io-event's selector interface under Async, fibers transfer to and from a
 * loop fiber). Everything about the core that does not depend on that
 * difference lives here, once: the core handle, its wake descriptor and the
 * fork generation it belongs to; the wait table (token -> parked fiber);
 * the descriptor table; how a fiber parks and is resumed; the poll with its
 * fairness batch, the close scan and the cap the scan puts on the kernel
 * wait; timeout parsing; io_close. A front end describes how a parking
 * fiber switches to its loop (farce_front_end), and its loop switches to the
 * fibers farce_loop_next hands it.
 *
 * docs/cgo-hazards.md's rules are kept here: Go sees integers only (rule 1), every
 * switch and raise happens after the Go call returned (2), the wait table
 * marks every parked fiber (3), the kernel wait runs without the GVL and its
 * unblock function only writes the wake descriptor (4), the stack is
 * checked before Go runs on a fiber stack (5), and a loop inherited through
 * fork is inert: no Go call, no descriptor closed (7).
 */
#ifndef FARCE_EVENT_LOOP_H
#define FARCE_EVENT_LOOP_H 1

#include <stdint.h>
#include <time.h>
#include <unistd.h>
#include <ruby.h>
#include <ruby/io.h>
#include "core_access/core_door.h"
#include "core_access/core_loader.h"
#include "platforms/clock.h"
#include "loop/fd_table.h"
#include "loop/inflight_ops.h"
#include "loop/stall.h"
#include "loop/turns.h"
#include "loop/wait_entry.h"
#include "loop/ruby_io.h"

#define FARCE_BATCH 256                 /* fairness: completions taken from Go per poll */
#define FARCE_CLOSE_SCAN_NS 50000000LL /* how often waited descriptors are checked for close */

typedef struct farce_loop farce_loop;

/* A completion operation queued since the last poll, which submits it
 * (io_uring resolves its descriptor number only then): farce_loop_poll
 * checks it against its IO first. */
typedef struct {
    uint64_t token;
    VALUE io; /* marked (the parked fiber's frame holds it too) */
    int fd;
} farce_queued_op;

/* What a fiber that parks hands its front end's to_loop (through
 * rb_protect's one argument): the front end's Ruby object, and the fiber
 * itself, which the park has asked Ruby for already. */
typedef struct {
    VALUE owner, fiber;
} farce_parking;

/* How one front end switches fibers. */
typedef struct {
    const char *name;          /* for messages: "Farce::Scheduler" */
    /* Switches from the current (parking) fiber to the loop; returns what
     * the fiber is resumed with. parking is a farce_parking *. */
    VALUE (*to_loop)(VALUE parking);
    /* io-event's contract: a descriptor wait always suspends the fiber,
     * even when the descriptor is ready at once; the loop resumes it. */
    int suspend_when_ready;
    /* Whether the current fiber can park (switch to the loop and be switched
     * back): not a blocking fiber of the scheduler, not the selector's loop
     * fiber. One that cannot (the root fiber calling a hook by hand) gets a
     * blocking wait with the GVL released instead, as Ruby itself does
     * without a scheduler: switching away from a fiber nobody will resume
     * would hang it. Asked only before a wait. */
    int (*can_park)(VALUE owner);
    /* Gives the loop a turn because the running fiber held it past the turn
     * budget (farce_loop_turn_check): the fiber is queued as ready and the
     * loop runs an iteration before it continues. Returns 0 when the
     * current fiber cannot give one (it cannot park: the thread's own
     * fiber, the selector's loop fiber, a fiber resumed inside another's
     * turn): it goes on, and nothing else runs meanwhile. */
    int (*give_turn)(farce_loop *l);
} farce_front_end;

struct farce_loop {
    const farce_front_end *front;
    VALUE owner;               /* the front end's Ruby object (not marked: it owns this) */
    int64_t handle;            /* Go core handle; 0 before start and after release */
    /* The copy of the core the handle belongs to (farce_core_load() at
     * start; farce_core_none() before). Every call goes through it, so an
     * object of one fork generation never calls another's copy. */
    const farce_core_copy *core;
    int closed;
    int wake_fd;
    uint64_t fork_generation;  /* farce_fork_generation at creation: inert when it differs */
    int ops;                   /* the core performs completion operations (io_uring) */
    VALUE thread;              /* the thread that runs the loop */
    VALUE backend;             /* :epoll, :io_uring, ... once started */
    VALUE fallback_reason;     /* why auto did not pick the first choice, or nil */

    farce_wait *waits;         /* the wait table: token slot -> parked fiber */
    uint32_t nwaits;
    st_table *blocked;         /* fiber -> token of its `block` wait (Fiber::Scheduler#unblock) */
    farce_fd_table fds;        /* descriptor identity and facts */
    long parked;               /* fibers in a wait of ours, resumed or not */
    long fd_parked;            /* of which waiting on a descriptor (or an operation on one) */
    int64_t last_scan;
    unsigned scan_polls;       /* polls since the close scan last read the clock */
    int slept;                 /* the last poll waited in the kernel (and read the clock after) */

    farce_completion batch[FARCE_BATCH];
    int batch_pos, batch_len;

    volatile int in_kernel_wait; /* a wakeup from another thread must write wake_fd */
    /* A wakeup from another thread (the selector's push + wakeup) came while
     * the loop was not in its kernel wait: the next poll must not wait. Set
     * and read with the GVL held; the front end clears it right before it
     * looks at its ready work (sel_select), the poll when it skips a wait
     * for it. Ruby code the loop runs between the two (a WeakMap lookup in
     * the close scan) may let the waking thread run there. */
    volatile int wake_pending;
    int running;                 /* the front end's loop runs (it owns the thread's attention) */
    double idle_duration;        /* seconds the last blocking poll slept in the kernel */
    long ops_submitted;          /* completion operations started (stats) */
    long transfer_calls;         /* read/write system calls io_transfer.c made itself (stats) */
    long file_cached;            /* file steps the page cache answered on this thread (RWF_NOWAIT) */
    long file_offloads;          /* file steps handed to the worker pool (stats) */
    long ops_in_flight;          /* of which not reaped yet: their memory is the kernel's */
    int release_pending;         /* closed, but the release waits for the loop's thread (inflight_ops.c) */
    farce_inflight_ops inflight_ops; /* on the keeper's list while it can perform operations (inflight_ops.h) */

    farce_turns turns;           /* when the running fiber's turn began, its budget (turns.h) */

    farce_stall stall;           /* stall detection (stall.h) */

    /* Load (stats): time since start and time spent in the kernel wait */
    int64_t created_ns;
    int64_t idle_ns;

    int64_t resumed_at[FARCE_BATCH]; /* when batch[i]'s fiber resumed (0: it did not), for the next poll */
    /* The core keeps the wake-up latency histogram (and resumed_at is
     * stamped) only once someone read the stats: until then it costs
     * nothing (farce_loop_stats). */
    int wakeup_latency;
    /* The core's clock at the end of the last poll that did not wait in
     * the kernel, for the first turn that begins after it: the loop
     * dispatches right after the poll, so it is still now, one clock
     * reading fewer per poll. 0: read the clock. */
    int64_t polled_at;
    /* When the loop last polled or asked the core to move its scheduler
     * tick (farce_loop_turn_begins_at): after FARCE_CORE_TICK_NS of turns
     * with neither, it asks. */
    int64_t core_ticked_ns;
    long core_ticks; /* of those calls (stats) */

    /* Tokens the core reserved for descriptor waits (farce_poll_batch): a
     * fiber parks on one at once, and the next poll starts its wait
     * (fds.deferred), one call into Go fewer per wait (wait_table.c). */
    uint64_t reserve[FARCE_DEFERRED_WAITS];
    int nreserve;
    /* Wakes (Fiber::Scheduler#unblock) the next poll applies, before it
     * fires timers: a wake from the loop's thread costs no call either. */
    uint64_t *wakes;
    long nwakes, wakes_cap;
    /* Fibers polling a descriptor with no kernel wait (a Windows pipe,
     * file or console: farce_loop_park_polled): their token -> descriptor,
     * so that io_close wakes them. No kernel wait knows of them, so
     * forgetting the descriptor reaches none. NULL until the first. */
    st_table *polled;
    /* Operations queued since the last poll (farce_loop_note_op) */
    farce_queued_op *queued_ops;
    long nqueued_ops, queued_ops_cap;
};

/* ---- lifetime ------------------------------------------------------------- */

void farce_loop_init(farce_loop *l, const farce_front_end *front, VALUE owner);
/* Starts the Go core (loading it first if needed) on the named backend; a
 * NULL name means FARCE_BACKEND from the environment, else "auto". Raises
 * ArgumentError for a name the core does not offer, Farce::Error when it
 * cannot start. On a fiber stack: the stack check comes first. */
void farce_loop_start_core(farce_loop *l, const char *backend);
static inline void farce_loop_start(farce_loop *l, const char *backend)
{
    if (RB_LIKELY(l->handle)) return; /* every wait asks: inline */
    farce_loop_start_core(l, backend);
}
/* Frees the Go scheduler and forgets every wait without resuming it, after
 * the kernel completed every operation (inflight_ops.c). Returns 1 when done;
 * 0 when the release was handed to the loop's thread (called from another
 * thread while the loop runs or has operations in flight: the loop is
 * woken and releases itself, see farce_loop_finish_release) or the kernel
 * still holds memory (kept: a leak, never a free). The loop is closed for
 * every hook either way. */
int farce_loop_release(farce_loop *l);
/* On the loop's thread, wherever the loop notices it was closed: completes
 * a release handed over by another thread. */
void farce_loop_finish_release(farce_loop *l);
/* Cancels every completion operation of the loop and waits (GVL released)
 * until the kernel completed them. Returns 1 when none is left, 0 when
 * some are (another thread runs the ring; their pins must stay). Owner
 * thread only. check_ints: Ruby's interrupts run between waits (may raise). */
int farce_loop_drain_ops(farce_loop *l, int check_ints);
/* The loop stopped (run raised) with operations in flight: drain them now,
 * and let their fibers wait for readiness instead when they run again. */
void farce_loop_stop_ops(farce_loop *l);
void farce_loop_mark(farce_loop *l);
/* From the GC free function: the handle (and the wait table, when
 * operations are in flight) wait for farce_release_orphans (inflight_ops.h);
 * calls no Go. */
void farce_loop_free(farce_loop *l);
size_t farce_loop_memsize(const farce_loop *l);

static inline int farce_loop_inert(const farce_loop *l) { return l->fork_generation != farce_fork_generation; }
/* Raises unless the loop can run: not inherited through fork, not closed.
 * (Inline: every hook asks.) */
NORETURN(void farce_loop_raise_unusable(const farce_loop *l));
static inline void farce_loop_check_usable(const farce_loop *l)
{
    if (RB_UNLIKELY(farce_loop_inert(l) || l->closed)) farce_loop_raise_unusable(l);
}

/* Raises Farce::Error unless the calling thread owns the loop: the core's per-thread state (the poll driver's tables, the
 * io_uring submission queue) is not synchronised, and a fiber parks only in
 * its own thread's loop. A loop with nothing in flight (no parked fiber, no
 * completion op, not running) moves to the calling thread instead: a
 * scheduler made in one thread and set in another. Every hook but unblock,
 * fiber_interrupt, stats, io_close and the release asks. (Inline: every
 * hook asks.) */
void farce_loop_claim_or_raise(farce_loop *l);
/* The same without raising: 1 when the calling thread owns the loop (now). */
int farce_loop_try_claim(farce_loop *l);
static inline void farce_loop_check_thread(farce_loop *l)
{
    if (RB_UNLIKELY(rb_thread_current() != l->thread)) farce_loop_claim_or_raise(l);
}

/* ---- the loop -------------------------------------------------------------- */

/* Takes up to FARCE_BATCH finished waits from the core: without blocking
 * first, then, if none and block_ns != 0, in the kernel with the GVL
 * released for up to block_ns (< 0: no bound), capped by the close scan
 * while descriptor waits are parked. Runs the close scan. Returns the
 * count, or -EINTR after Ruby's interrupts ran (they may raise); raises on
 * core errors, and SystemStackError before it enters Go on a stack that is
 * nearly used up. */
int64_t farce_loop_poll(farce_loop *l, int64_t block_ns);
/* Takes the next finished wait of the batch taken by farce_loop_poll, in
 * order, skipping cancelled ones: clears its entry and stores it in *w with
 * the result to resume its fiber with. Returns 0 when the batch is done or
 * the loop was released. The front end then switches to w->fiber (its loop
 * does the switch itself, so that no loop frame sits between the loop
 * and the fiber). */
int farce_loop_next(farce_loop *l, farce_wait *w, int64_t *result);
static inline int farce_loop_batch_pending(const farce_loop *l) { return l->batch_pos < l->batch_len; }

/* Completion operations and descriptor numbers. An operation the core
 * queued (farce_core_submit_op) reaches the kernel at the next poll,
 * and the kernel resolves its descriptor number only then; the fibers that
 * run before (and other threads, if the poll submitted it with the GVL
 * released) may close its IO meanwhile and open a file that gets the same
 * number. So every operation is noted when queued, and farce_loop_poll,
 * with the GVL held right before the poll that submits it, cancels those
 * whose IO no longer has that descriptor: a queued operation cancelled is
 * never run (the driver withdraws it), and its fiber gets IOError as a
 * closed wait does. A Ruby-level close cannot slip between the check and
 * the submission: Ruby sets the IO's descriptor to -1 before close(2), with
 * the GVL held. The core submits queued operations at no other point
 * (internal/driver/uring_ops_linux.go). farce_loop_op_room makes room for
 * one note and may raise: call it before submitting, so that nothing
 * raises between the submission and the park. */
void farce_loop_op_room(farce_loop *l);
static inline void farce_loop_note_op(farce_loop *l, uint64_t token, VALUE io, int fd)
{
    farce_queued_op *q = &l->queued_ops[l->nqueued_ops++];
    q->token = token;
    q->io = io;
    q->fd = fd;
}

/* io_close (Ruby 4.0): fibers waiting on the descriptor raise IOError at
 * once and the number may be reused. */
void farce_loop_io_close(farce_loop *l, VALUE io_or_descriptor);
/* Process.wait through a pidfd the loop waits on. Returns the status, false
 * when the fiber was switched to by someone else first, or Qundef when no
 * pidfd can be had (the front end then waits in a thread). */
VALUE farce_loop_process_wait(farce_loop *l, VALUE pid, VALUE flags);
/* The core's counters as a Hash. */
VALUE farce_loop_stats(farce_loop *l);

/* The backends this system's core offers (Go's list, "auto" first), as
 * symbols; loads the core. */
VALUE farce_backend_names(void);

/* ---- turns ------------------------------------------------------------------ */

/* A turn ended in which the watchdog saw a stall: calls the owner's
 * __report_stall(fiber, seconds, backtrace) once per stall. */
void farce_loop_report_stall(farce_loop *l);
/* Turns stall detection on (threshold_ns > 0) or off for the loop; raises
 * Farce::Error when the core cannot watch. Before the core starts it is
 * noted, and farce_loop_start turns it on. */
void farce_loop_watch_stalls(farce_loop *l, int64_t threshold_ns);
/* How long after a poll (or the last such call) the turns that begin call
 * into the core so that Go's sysmon sees the thread's goroutine pass through
 * Go's scheduler (core/sched_tick.go). The core moves the tick at most every
 * 4 ms (a poll just before that finds it not yet due), so the tick moves
 * within 6 ms and a turn: well under the 10 ms after which sysmon takes the P. */
#define FARCE_CORE_TICK_NS 2000000LL
void farce_loop_tick_core(farce_loop *l, int64_t now);
/* The loop is about to switch to a fiber it took from its ready work: a new
 * turn starts at now (and is published for the stall watchdog). */
static inline int64_t farce_loop_turn_begins_at(farce_loop *l, int64_t now)
{
    if (RB_UNLIKELY(now - l->core_ticked_ns >= FARCE_CORE_TICK_NS)) farce_loop_tick_core(l, now);
    farce_turns_begin(&l->turns, now);
    farce_turn_state *ts = l->stall.turns;
    if (ts) {
        __atomic_store_n(&ts->started_ns, now, __ATOMIC_RELAXED);
        __atomic_store_n(&ts->seq, ts->seq + 1, __ATOMIC_RELEASE);
        __atomic_store_n(&ts->active, 1, __ATOMIC_RELEASE);
    }
    return now;
}
static inline int64_t farce_loop_turn_begins(farce_loop *l) { return farce_loop_turn_begins_at(l, farce_monotonic_ns()); }
/* Control is back in the loop: the running fiber's turn is over. Reports a
 * stall the watchdog saw in it. */
static inline void farce_loop_turn_ends(farce_loop *l)
{
    farce_turn_state *ts = l->stall.turns;
    if (!ts || !ts->active) return;
    __atomic_store_n(&ts->active, 0, __ATOMIC_RELEASE);
    if (__atomic_load_n(&ts->stall_seq, __ATOMIC_ACQUIRE) == ts->seq) farce_loop_report_stall(l);
}
void farce_loop_give_turn(farce_loop *l);
/* Budget in seconds (nil or 0: none) to nanoseconds; raises ArgumentError
 * for NaN and negative values. */
int64_t farce_turn_budget_ns(VALUE seconds);
/* Called by hooks at the point where they would return without blocking
 * (and by Fiber.schedule): when the running fiber has held the loop longer
 * than the budget, the loop gets a turn first. */
static inline void farce_loop_turn_check(farce_loop *l)
{
    if (l->turns.owed || farce_turns_spent(&l->turns)) farce_loop_give_turn(l);
}
/* The same for a hook that has done its work and only returns (a transfer
 * that did not wait): the turn is owed, and given at the start of the
 * fiber's next hook (farce_loop_give_owed_turn), never here. A turn here would
 * let an exception reach the fiber after its bytes moved: Timeout,
 * Fiber#raise or a kill delivered in that turn lost what the read had read
 * (and a write that happened looked as if it had not). */
static inline void farce_loop_turn_check_after_transfer(farce_loop *l)
{
    if (farce_turns_spent(&l->turns)) l->turns.owed = 1;
}
/* farce_loop_give_turn inside a hook on io (an IO, converted), before the
 * hook reads its descriptor: raises IOError when the number names another
 * open file after the turn than before it (event_loop.c). */
void farce_loop_give_turn_on(farce_loop *l, VALUE io);
/* farce_loop_turn_check for a hook on io (io_wait). */
static inline void farce_loop_turn_check_on(farce_loop *l, VALUE io)
{
    if (l->turns.owed || farce_turns_spent(&l->turns)) farce_loop_give_turn_on(l, io);
}
/* A hook on io about to do work: the turn an earlier transfer owes, first. */
static inline void farce_loop_give_owed_turn(farce_loop *l, VALUE io)
{
    if (RB_UNLIKELY(l->turns.owed)) farce_loop_give_turn_on(l, io);
}

/* Wakes the wait token names at the next poll. On the loop's thread only. */
void farce_loop_wake(farce_loop *l, uint64_t token);

/* ---- small helpers --------------------------------------------------------- */

static inline int farce_loop_can_park(const farce_loop *l) { return l->front->can_park(l->owner); }

/* Ruby timeout (nil or seconds) to nanoseconds; -1 means none. NaN and
 * negative durations raise ArgumentError, in every hook of both front ends. */
int64_t farce_timeout_ns(VALUE timeout);

/* Raises the Ruby exception for a failed core call: ArgumentError for bad
 * input, SystemCallError for an errno, Farce::Error otherwise. */
NORETURN(void farce_loop_raise(const farce_loop *l, int64_t code, const char *what));


#endif
