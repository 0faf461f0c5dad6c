/*
 * The wait table: the Go core names each wait by a token (slot +
 * generation); the table maps the slot to the fiber parked on it, which
 * Ruby's GC marks through farce_loop_mark (docs/cgo-hazards.md rules 1 and 3). Here a
 * fiber parks on a token, and leaves it again when something other than the
 * loop switched to it. How it switches to the loop is the front end's
 * (farce_front_end.to_loop); see event_loop.h.
 */
#include <errno.h>
#include <string.h>
#include "loop/wait_table.h"
#include "platforms/core_fd.h"
#include "platforms/sys_io.h"
#include <ruby/thread.h>
#include <ruby/fiber/scheduler.h>

farce_wait *farce_loop_wait_grow(farce_loop *l, uint32_t slot)
{
    uint32_t n = l->nwaits ? l->nwaits : 256;
    while (n <= slot) n *= 2;
    l->waits = ruby_xrealloc2(l->waits, n, sizeof(farce_wait));
    memset(l->waits + l->nwaits, 0, (size_t)(n - l->nwaits) * sizeof(farce_wait));
    l->nwaits = n;
    return &l->waits[slot];
}

static int holds(const farce_loop *l, uint64_t token, VALUE fiber)
{
    uint32_t slot = farce_token_slot(token);
    return slot < l->nwaits && l->waits[slot].gen == farce_token_gen(token) && l->waits[slot].fiber == fiber;
}

/* A deferred wait (not started yet) whose fiber left it: the poll must
 * not start it. The core's cancel releases its reserved token. */
static void drop_deferred(farce_fd_table *t, uint64_t token)
{
    for (int k = 0; k < t->ndeferred; k++) {
        if (t->deferred[k].token != token) continue;
        memmove(&t->deferred[k], &t->deferred[k + 1], (size_t)(t->ndeferred - k - 1) * sizeof(farce_fd_wait));
        t->ndeferred--;
        return;
    }
}

void farce_loop_abandon(farce_loop *l, uint64_t token)
{
    uint32_t slot = farce_token_slot(token);
    if (slot >= l->nwaits) return;
    farce_wait *e = &l->waits[slot];
    if (e->gen != farce_token_gen(token)) return; /* the loop resumed it: nothing to undo */
    if (e->kind == FARCE_WAIT_OP) return;         /* never abandoned: see farce_loop_park_op */
    if (e->kind == FARCE_WAIT_FD) l->fd_parked--;
    if (l->fds.ndeferred) drop_deferred(&l->fds, token);
    if (e->kind == FARCE_WAIT_FIBER && e->extra != Qundef && e->extra) {
        st_data_t key = (st_data_t)e->fiber;
        st_delete(l->blocked, &key, NULL);
    }
    memset(e, 0, sizeof(*e));
    l->parked--;
    if (l->handle && !farce_loop_inert(l)) farce_core_cancel_quietly(l->core, l->handle, token);
}

/* A fiber that cannot park must never reach the switch: the scheduler's
 * yield would raise FiberError (or return to whoever resumed it), and a
 * completion op would never be reaped. Callers that can wait otherwise
 * (descriptor waits, sleep) do so before they get a token; anything else
 * raises here, with the token given back. */
static void refuse_unparkable(farce_loop *l, uint64_t token, const char *what)
{
    if (RB_LIKELY(farce_loop_can_park(l))) return;
    if (l->handle && !farce_loop_inert(l)) farce_core_cancel_quietly(l->core, l->handle, token);
    rb_raise(farce_eError, "%s#%s called from a fiber that cannot wait in it (a blocking fiber, e.g. the thread's "
             "root fiber, the selector's loop fiber, or a fiber resumed inside another fiber's turn, e.g. "
             "Enumerator#next's): call it from a fiber the scheduler runs "
             "(Fiber.schedule / a task), or use the blocking call Ruby offers without a scheduler",
             l->front->name, what);
}

/* farce_loop_park once the caller knows the fiber can park. */
int64_t farce_loop_park_parkable(farce_loop *l, uint64_t token, enum farce_wait_kind kind, VALUE extra)
{
    VALUE fiber = rb_fiber_current();
    farce_wait *e = farce_loop_wait_at(l, farce_token_slot(token));
    e->gen = farce_token_gen(token);
    e->kind = (uint8_t)kind;
    e->fiber = fiber;
    e->extra = extra;
    if (kind == FARCE_WAIT_FIBER && extra != Qundef) st_insert(l->blocked, (st_data_t)fiber, (st_data_t)token);
    l->parked++;
    if (kind == FARCE_WAIT_FD) l->fd_parked++;

    int state = 0;
    farce_parking parking = {l->owner, fiber};
    VALUE result = rb_protect(l->front->to_loop, (VALUE)&parking, &state);
    if (state) {
        farce_loop_abandon(l, token);
        rb_jump_tag(state);
    }
    if (holds(l, token, fiber)) {
        /* switched to by someone other than the loop */
        farce_loop_abandon(l, token);
        return FARCE_RESUMED_ELSEWHERE;
    }
    return FIXNUM_P(result) ? FIX2LONG(result) : FARCE_RESULT_WOKEN;
}

/* ---- polled waits: a descriptor with no kernel wait (anything but a socket
 * on Windows) is asked again after each step of a timer ---- */
struct polled_park {
    farce_loop *l;
    uint64_t token;
};

static VALUE park_polled(VALUE arg)
{
    struct polled_park *p = (struct polled_park *)arg;
    return LL2NUM(farce_loop_park_parkable(p->l, p->token, FARCE_WAIT_FIBER, Qundef));
}

int64_t farce_loop_park_polled(farce_loop *l, int fd, int64_t ns)
{
    if (!farce_loop_can_park(l)) {
        /* nobody would resume it: the thread sleeps, as Kernel#sleep does */
        struct timeval tv = {(long)(ns / 1000000000LL), (long)((ns % 1000000000LL) / 1000)};
        rb_thread_wait_for(tv);
        return 0;
    }
    farce_loop_start(l, NULL); /* the selector starts its core on first need */
    uint64_t token;
    int64_t r = farce_core_park(l->core, l->handle, ns, &token);
    if (r < 0) farce_loop_raise(l, r, "wait");
    if (!l->polled) l->polled = st_init_numtable();
    st_insert(l->polled, (st_data_t)token, (st_data_t)fd);
    struct polled_park p = {l, token};
    int state = 0;
    VALUE result = rb_protect(park_polled, (VALUE)&p, &state);
    st_data_t key = (st_data_t)token;
    int closed = !st_delete(l->polled, &key, NULL); /* io_close took it out when it woke the fiber */
    if (state) rb_jump_tag(state);
    if (closed) farce_raise_closed(fd);
    return NUM2LL(result) == FARCE_RESUMED_ELSEWHERE ? FARCE_RESUMED_ELSEWHERE : 0;
}

/* Takes a reserved token and notes the wait the next poll starts on it. */
static uint64_t defer_wait(farce_loop *l, int fd, uint32_t events, int known)
{
    if (l->nreserve == 0 || l->fds.ndeferred >= FARCE_DEFERRED_WAITS) return 0;
    uint64_t token = l->reserve[--l->nreserve];
    farce_fd_wait *d = &l->fds.deferred[l->fds.ndeferred++];
    d->token = token;
    d->fd = fd < 0 ? fd : farce_core_fd(fd);
    d->events = events;
    d->known = known;
    d->unused = 0;
    return token;
}

uint64_t farce_loop_defer_park(farce_loop *l) { return defer_wait(l, -1, 0, 0); }

int64_t farce_loop_park(farce_loop *l, uint64_t token, enum farce_wait_kind kind, VALUE extra)
{
    refuse_unparkable(l, token, kind == FARCE_WAIT_FIBER && extra != Qundef ? "block" : "a wait");
    return farce_loop_park_parkable(l, token, kind, extra);
}

/* States of a completion operation, from this side:
 *   submitted  - the entry holds fiber + pin (marked); the kernel may read or
 *                write the memory at any time.
 *   cancelling - an exception (Thread#raise, Timeout, Fiber#raise,
 *                fiber_interrupt, Async's Task#stop) or a close reached the
 *                fiber: the core was asked to cancel (farce_cancel_op), and
 *                the fiber parks again. Its exception is held, later ones
 *                are dropped.
 *   reaped     - the loop resumed the fiber with the completion (dispatch
 *                cleared the entry): the kernel is done.
 *   released   - park_op returns or re-raises the held exception; only now
 *                may the caller's frame (and so the buffer) go away.
 * The fiber never leaves before "reaped"; a switch to it from anyone but the
 * loop parks it again. If the loop is released meanwhile, the release
 * drains every operation before it forgets the waits (inflight_ops.c), and this
 * fiber is never resumed.
 *
 * The held jump need not be an exception: Fiber#kill (Ruby 3.3+) unwinds
 * with TAG_FATAL and a non-exception errinfo that Ruby's fiber start
 * checks, and $! cannot be assigned a non-exception. So errinfo is left as
 * the jump set it (nothing here clears it) and rb_jump_tag replays it; an
 * exception is re-raised by value, which survives later jumps. A later
 * non-exception jump replaces a held one (only the latest one's errinfo is
 * still in place). `throw` never reaches a parked fiber: it starts in the
 * running fiber. */
/* errinfo may be an internal object (a throw's) or a Fixnum (a kill's) */
static int is_exception(VALUE v)
{
    return !RB_SPECIAL_CONST_P(v) && RB_BUILTIN_TYPE(v) == T_OBJECT && rb_obj_is_kind_of(v, rb_eException);
}

int64_t farce_loop_park_op(farce_loop *l, uint64_t token, VALUE pin, int64_t *reaped)
{
    VALUE fiber = rb_fiber_current();
    farce_wait *e = farce_loop_wait_at(l, farce_token_slot(token));
    e->gen = farce_token_gen(token);
    e->kind = FARCE_WAIT_OP;
    e->stopped = 0;
    e->fiber = fiber;
    e->extra = pin;
    l->parked++;
    l->fd_parked++;

    int held_state = 0;
    VALUE held = Qnil;
    farce_parking parking = {l->owner, fiber};
    for (;;) {
        int state = 0;
        VALUE result = rb_protect(l->front->to_loop, (VALUE)&parking, &state);
        if (!holds(l, token, fiber) || l->waits[farce_token_slot(token)].kind != FARCE_WAIT_OP) {
            /* reaped: dispatch cleared the entry and passed the result */
            RB_GC_GUARD(pin);
            *reaped = FIXNUM_P(result) ? FIX2LONG(result) : -EINTR;
            if (held_state) {
                if (is_exception(held)) rb_exc_raise(held);
                rb_jump_tag(held_state);
            }
            return *reaped;
        }
        if (state) {
            if (!held_state || !is_exception(held)) {
                held_state = state;
                held = rb_errinfo();
            }
            if (l->handle && !farce_loop_inert(l)) farce_core_cancel_op_quietly(l->core, l->handle, token);
        }
        /* else: switched to by hand; the operation is still in flight */
    }
}

struct poll_nogvl {
    struct pollfd pfd;
    int timeout_ms;
    int result, error;
};

static void *poll_nogvl_body(void *p)
{
    struct poll_nogvl *a = p;
    a->result = poll(&a->pfd, 1, a->timeout_ms);
    a->error = errno;
    return NULL;
}

/* poll(2) on fd with the GVL released, Ruby's interrupts run between tries
 * (they may raise); the ready events in Ruby's bits (a hang-up or error:
 * all of them, the caller's next call finds out), 0 on timeout. For a
 * non-blocking fiber that cannot park, for which rb_wait_for_single_fd
 * would ask the scheduler, this very hook, again. */
static int64_t poll_fd_blocking(int fd, uint32_t events, int64_t timeout_ns)
{
    struct poll_nogvl a;
    int64_t deadline = timeout_ns >= 0 ? farce_monotonic_ns() + timeout_ns : 0;
    for (;;) {
        a.pfd.fd = fd;
        a.pfd.events = (short)(((events & RUBY_IO_READABLE) ? POLLIN : 0) | ((events & RUBY_IO_PRIORITY) ? POLLPRI : 0) |
                               ((events & RUBY_IO_WRITABLE) ? POLLOUT : 0));
        a.pfd.revents = 0;
        a.timeout_ms = -1;
        if (timeout_ns >= 0) {
            int64_t left = deadline - farce_monotonic_ns();
            a.timeout_ms = left <= 0 ? 0 : (int)((left + 999999) / 1000000);
        }
        rb_thread_call_without_gvl(poll_nogvl_body, &a, RUBY_UBF_IO, NULL);
        if (a.result < 0 && a.error != EINTR) {
            errno = a.error;
            rb_sys_fail("wait on descriptor");
        }
        if (a.result > 0) {
            if (a.pfd.revents & POLLNVAL) rb_raise(rb_eIOError, "closed stream");
            if (a.pfd.revents & (POLLHUP | POLLERR)) return events;
            int64_t got = 0;
            if (a.pfd.revents & POLLIN) got |= RUBY_IO_READABLE;
            if (a.pfd.revents & POLLPRI) got |= RUBY_IO_PRIORITY;
            if (a.pfd.revents & POLLOUT) got |= RUBY_IO_WRITABLE;
            return got & events;
        }
        rb_thread_check_ints();
        if (a.result == 0 && timeout_ns >= 0 && farce_monotonic_ns() >= deadline) return 0;
    }
}

/* farce_loop_wait_fd for a fiber that cannot park: the thread waits in
 * poll(2) with the GVL released and Ruby's interrupts honoured, as the same
 * call would without a scheduler. A blocking fiber has no scheduler, so
 * Ruby's own rb_wait_for_single_fd asks none; a non-blocking one that
 * cannot park (resumed inside another fiber's turn: can_park) waits here. */
static int64_t wait_fd_blocking(int fd, uint32_t events, int64_t timeout_ns)
{
    if (!NIL_P(rb_fiber_scheduler_current())) return poll_fd_blocking(fd, events, timeout_ns);
    struct timeval tv, *tvp = NULL;
    if (timeout_ns >= 0) {
        tv.tv_sec = (time_t)(timeout_ns / 1000000000LL);
        tv.tv_usec = (suseconds_t)((timeout_ns % 1000000000LL) / 1000);
        tvp = &tv;
    }
    int r = rb_wait_for_single_fd(fd, (int)events, tvp);
    if (r < 0) rb_sys_fail("wait on descriptor");
    return r;
}

int64_t farce_loop_wait_fd(farce_loop *l, int fd, uint32_t events, int64_t timeout_ns, int known)
{
    if (RB_UNLIKELY(!farce_loop_can_park(l))) return wait_fd_blocking(fd, events, timeout_ns);
    farce_loop_start(l, NULL);
    /* Park at once on a reserved token; the next poll starts the wait
     * before it asks the kernel (farce_poll_batch), and hands it out in
     * that same poll when the descriptor is ready by then. The result is
     * the same as below, without a call into Go: a fiber waits after a
     * read or write said EAGAIN (or a short read), so its descriptor is
     * rarely ready at once. Only waits without a timeout (its clock would
     * start late) and without a probe (UNKNOWN: io_wait asks the kernel
     * first). */
    uint64_t token = timeout_ns < 0 && known != FARCE_KNOWN_NOTHING ? defer_wait(l, fd, events, known) : 0;
    VALUE ready = Qundef;
    if (!token) {
        int64_t r = farce_core_wait_fd(l->core, l->handle, fd, events, timeout_ns, known, &token);
        if (r < 0) farce_loop_raise(l, r, "wait on descriptor");
        if (r > 0) {
            if (!l->front->suspend_when_ready) return r;
            /* park anyway, on a wait that finishes at the next poll, and
             * resume with these events from there (farce_loop_next) */
            int64_t y = farce_core_yield(l->core, l->handle, 0, &token);
            if (y < 0) farce_loop_raise(l, y, "wait on descriptor");
            ready = LONG2FIX((long)r);
        } else if (timeout_ns == 0) {
            farce_core_cancel_quietly(l->core, l->handle, token); /* right after the checked wait_fd */
            return 0;
        }
    }
    /* can_park was asked on entry (nothing since switched fibers): one
     * Ruby lookup of the current scheduler per wait, not two */
    int64_t result = farce_loop_park_parkable(l, token, FARCE_WAIT_FD, ready);
    if (result == FARCE_RESULT_CLOSED) farce_raise_closed(fd);
    return result;
}
