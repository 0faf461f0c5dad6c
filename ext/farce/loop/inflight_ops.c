/*
 * Memory the kernel owns: completion operations (io_uring) and what keeps
 * their buffers alive until the kernel is done (a buffer the GC moved or
 * freed under a pending read would be written after free); and the
 * handles of loops collected without close. See inflight_ops.h.
 *
 * The rule: no pin (the fiber parked on an operation, whose stack holds
 * the string or IO an IO::Buffer may point into, and the buffer itself) is
 * released before the core said that the operation's completion was
 * reaped. Three ways a pin could go early, and what stops each:
 *
 *  - close/abandon: the release drains first (farce_drain_ops, GVL
 *    released, 50 ms per call, interrupts run between calls) and only then
 *    forgets the waits and closes the core. A release from another thread
 *    cannot drain (only the ring's thread can reap it), so it is handed to
 *    the loop's thread (woken); until that thread releases, the pins stay.
 *  - GC: a loop's own mark function is not enough, since the loop, its
 *    fibers and their buffers become garbage together and are swept in one
 *    GC. So every loop that can perform operations is on a list that a
 *    permanent "keeper" object marks: the pins of its operations in flight
 *    are reachable from a root for as long as they are in flight. A parked
 *    fiber usually references its scheduler (its stack holds it), so such a
 *    scheduler is not collected either: a scheduler dropped with
 *    operations in flight is a leak, never a free. Should it be collected
 *    anyway, its free function moves the wait table to the orphan list,
 *    where the keeper still marks it, and the next loop start drains it (on
 *    its thread) before anything is released.
 *  - a loop that stops with operations in flight (run raised): nobody
 *    reaps them until the next run, and the scheduler may be dropped. Its
 *    operations are drained at once (farce_loop_stop_ops); a fiber whose
 *    read was cancelled that way waits for readiness instead when it runs
 *    again, so no byte is consumed by a read nobody will see.
 *
 * The free function calls no Go (it may run on any fiber stack, in the
 * middle of a GC): orphans are released at the next start.
 *
 * The keeper's lists are the process's: every Ractor's loops are on them,
 * and those Ractors run at once. A native lock guards them (registration,
 * free, orphaning, release: never a hook's path). Nothing under it
 * allocates from Ruby's heap or releases the GVL: a thread that waited for
 * the lock at such a point would keep the GC's stop of every Ractor from
 * completing. The keeper's mark function takes no lock: the GC marks with
 * every Ractor stopped at a safe point, and no thread holds the lock at
 * one (a thread that released the GVL counts as stopped, which is why a
 * drain never runs under it).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <ruby.h> /* its config first: thread_native.h picks pthreads or Windows by it */
#include <ruby/thread_native.h>
#include "loop/inflight_ops.h"
#include "platforms/clock.h"
#include "core_access/core_loader.h" /* farce_fork_generation */

#define DRAIN_SLICE_NS 50000000LL       /* one farce_drain_ops call: interrupts run between */
#define DRAIN_LIMIT_NS 10000000000LL    /* give up (keep the pins) after this long */

/* ---- draining -------------------------------------------------------------- */

int64_t farce_inflight_ops_drain(const farce_core_copy *core, int64_t handle, int *wake_fd, int check_ints)
{
    int64_t deadline = farce_monotonic_ns() + DRAIN_LIMIT_NS;
    for (;;) {
        int64_t r = farce_core_drain_ops_blocking(core, handle, DRAIN_SLICE_NS, wake_fd);
        if (r == 0 || r == -FARCE_E_HANDLE) return 0;
        if (r < 0 && r != -EINTR) return r;
        if (farce_monotonic_ns() > deadline) return r;
        if (check_ints) rb_thread_check_ints();
    }
}

/* ---- the keeper ------------------------------------------------------------ */

struct orphan {
    const farce_core_copy *core;       /* the copy its handle belongs to */
    int64_t handle;
    uint64_t generation;               /* farce_fork_generation it was created in */
    int wake_fd;
    farce_wait *waits;                 /* NULL, or the table whose operations are in flight */
    uint32_t nwaits;
    int releasing;                     /* a thread drains it now (outside the lock) */
};

static rb_nativethread_lock_t lists_lock; /* op_loops and the orphans */
static farce_inflight_ops *op_loops;  /* loops that can perform operations (doubly linked) */
static struct orphan *orphans;   /* loops collected without close */
static long norphans, orphans_cap;
static VALUE keeper;

static void mark_inflight_ops(const farce_wait *waits, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        if (waits[i].gen && waits[i].kind == FARCE_WAIT_OP) {
            rb_gc_mark(waits[i].fiber);
            rb_gc_mark(waits[i].extra);
        }
    }
}

static void keeper_mark(void *p)
{
    for (farce_inflight_ops *l = op_loops; l; l = l->next) {
        if (*l->in_flight > 0) mark_inflight_ops(*l->waits, *l->nwaits);
    }
    for (long i = 0; i < norphans; i++) {
        if (orphans[i].waits) mark_inflight_ops(orphans[i].waits, orphans[i].nwaits);
    }
}

static const rb_data_type_t keeper_type = {"farce/operation pins", {keeper_mark, NULL, NULL}, 0, 0, 0};

void farce_inflight_ops_init_once(void)
{
    rb_nativethread_lock_initialize(&lists_lock);
    rb_global_variable(&keeper);
    keeper = TypedData_Wrap_Struct(0, &keeper_type, NULL);
}

void farce_inflight_ops_register(farce_inflight_ops *p, farce_wait *const *waits, const uint32_t *nwaits, const long *in_flight)
{
    if (p->registered) return;
    p->waits = waits;
    p->nwaits = nwaits;
    p->in_flight = in_flight;
    p->prev = NULL;
    rb_nativethread_lock_lock(&lists_lock);
    p->next = op_loops;
    if (op_loops) op_loops->prev = p;
    op_loops = p;
    rb_nativethread_lock_unlock(&lists_lock);
    p->registered = 1;
}

void farce_inflight_ops_unregister(farce_inflight_ops *p)
{
    if (!p->registered) return;
    rb_nativethread_lock_lock(&lists_lock);
    if (p->prev) p->prev->next = p->next;
    else op_loops = p->next;
    if (p->next) p->next->prev = p->prev;
    rb_nativethread_lock_unlock(&lists_lock);
    p->next = p->prev = NULL;
    p->registered = 0;
}

/* ---- loops collected without close ------------------------------------------ */

int farce_inflight_ops_orphan(const farce_core_copy *core, int64_t handle, uint64_t generation, int wake_fd,
                         farce_wait *waits, uint32_t nwaits)
{
    int r = 0;
    rb_nativethread_lock_lock(&lists_lock);
    if (norphans == orphans_cap) {
        long cap = orphans_cap ? orphans_cap * 2 : 8;
        struct orphan *n = realloc(orphans, cap * sizeof(*n)); /* not Ruby's heap: no GC under the lock */
        if (n) {
            orphans = n;
            orphans_cap = cap;
        } else {
            r = -ENOMEM;
        }
    }
    if (r == 0) orphans[norphans++] = (struct orphan){core, handle, generation, wake_fd, waits, waits ? nwaits : 0, 0};
    rb_nativethread_lock_unlock(&lists_lock);
    return r;
}

/* Takes the first orphan no thread releases yet, marked as being released:
 * it stays on the list (the keeper marks its pins) until done_with says. */
static int take_orphan(struct orphan *o)
{
    int found = 0;
    rb_nativethread_lock_lock(&lists_lock);
    for (long i = 0; i < norphans && !found; i++) {
        if (orphans[i].releasing) continue;
        orphans[i].releasing = 1;
        *o = orphans[i];
        found = 1;
    }
    rb_nativethread_lock_unlock(&lists_lock);
    return found;
}

/* The orphan take_orphan gave: off the list (released), or back to wait for
 * the next start (its ring is another thread's). */
static void done_with(const struct orphan *o, int released)
{
    rb_nativethread_lock_lock(&lists_lock);
    for (long i = 0; i < norphans; i++) {
        if (orphans[i].handle != o->handle || orphans[i].core != o->core || orphans[i].generation != o->generation)
            continue;
        if (released) orphans[i] = orphans[--norphans];
        else orphans[i].releasing = 0;
        break;
    }
    rb_nativethread_lock_unlock(&lists_lock);
}

void farce_release_orphans(void)
{
    /* the common case, no orphan at all, costs one load and no lock */
    if (__atomic_load_n(&norphans, __ATOMIC_RELAXED) == 0) return;
    struct orphan o;
    struct orphan kept[16];
    int nkept = 0;
    /* Each orphan is drained outside the lock (the GVL is released while the
     * kernel finishes), then taken off. One this thread cannot release is
     * put back after the pass, so that the pass ends. */
    while (take_orphan(&o)) {
        int released = 1;
        if (o.generation != farce_fork_generation) {
            /* inherited through fork: its core is the parent's, never called
             * here; the kernel fills the parent's buffers, not ours */
        } else if (o.waits && farce_inflight_ops_drain(o.core, o.handle, &o.wake_fd, 0) != 0) {
            released = 0; /* another thread's ring: keep the pins */
        } else {
            farce_core_close(o.core, o.handle);
        }
        if (released) {
            done_with(&o, 1);
            xfree(o.waits);
        } else if (nkept < (int)(sizeof(kept) / sizeof(kept[0]))) {
            kept[nkept++] = o;
        } else {
            done_with(&o, 0);
            break;
        }
    }
    for (int i = 0; i < nkept; i++) done_with(&kept[i], 0);
}
