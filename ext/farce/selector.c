//go:build ignore

/*
 * Farce::IOEventSelector: an io-event selector (the event loop interface
 * Async and Falcon run on) backed by farce's Go core. lib/farce/io_event.rb
 * publishes it as IO::Event::Selector::Farce, so IO_EVENT_SELECTOR=Farce
 * picks it.
 *
 * Unlike Farce::Scheduler (shim.c), which resumes fibers and lets them yield
 * back, io-event selectors use Fiber#transfer: a waiting fiber transfers to
 * the loop fiber, and `select` transfers to the fibers whose waits finished.
 * Anyone may transfer to a waiting fiber (Async's timers do); a wait notices
 * that its slot was not cleared by the loop and cancels itself.
 *
 * The DESIGN.md rules hold here as in shim.c: Go sees integers only, every
 * fiber switch and exception happens after the Go call returned, the stack
 * is checked before Go runs on a fiber stack, the kernel wait runs without
 * the GVL and its unblock function only writes the wake descriptor, and a
 * selector inherited through fork is inert (closed? is true, no Go call).
 *
 * The Go core starts at the first operation that needs it (a descriptor or
 * process wait, or a select that has to wait), not in `new`. Falcon's master
 * runs a short reactor (`Sync { endpoint.bound }`) before it forks its
 * workers; a child of a process whose Go runtime started can never use Go,
 * so starting it there would leave every worker without farce. A reactor
 * that only binds, runs tasks that finish, or pushes and transfers fibers
 * never starts it.
 *
 * Descriptor identity (fd_table.c) and the small helpers in glue.h are
 * shared with shim.c.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <ruby.h>
#include <ruby/io.h>
#include <ruby/io/buffer.h>
#include <ruby/thread.h>
#include "fd_table.h"
#include "glue.h"
#include "core_loader.h"
#include "selector.h"

#define SEL_BATCH 256            /* completions taken from Go per poll */
#define SEL_POLL_ROUNDS 4        /* full batches drained per select before timers get a turn */
#define SEL_CLOSE_SCAN_NS 50000000LL /* how often waited descriptors are checked for close */

static VALUE cSelector;
static ID id_alive_p, id_transfer, id_raise, id_process_wait, id_wait;

/* One Go wait slot: the fiber waiting on it (marked), or gen 0 when free. */
typedef struct {
    uint32_t gen;
    VALUE fiber;
} sel_wait;

typedef struct {
    int64_t handle; /* 0 until the core is needed (start_core), and again once closed */
    int closed;
    int wake_fd;
    uint64_t fork_generation;
    VALUE loop;
    VALUE backend;

    sel_wait *waits;
    uint32_t nwaits;
    farce_fd_table fds; /* descriptor identity and facts */
    long fd_waiting;   /* fibers in a descriptor wait of ours */
    int64_t last_scan;

    /* The ready list: positions grow without bound and map to ring[pos & mask],
     * so an entry keeps its position while queued even when the ring grows,
     * and resume/yield/raise can clear the entry they pushed. */
    VALUE *ring;
    uint64_t head, tail, mask;

    farce_completion batch[SEL_BATCH];
    int batch_pos, batch_len;

    volatile int blocked; /* in the kernel wait: wakeup must write the wake fd */
    double idle_duration;
} farce_selector;

/* ---- GC ------------------------------------------------------------------ */

static void sel_mark(void *p)
{
    farce_selector *s = p;
    rb_gc_mark(s->loop);
    rb_gc_mark(s->backend);
    for (uint64_t pos = s->head; pos < s->tail; pos++) rb_gc_mark(s->ring[pos & s->mask]);
    for (uint32_t i = 0; i < s->nwaits; i++) {
        if (s->waits[i].gen) rb_gc_mark(s->waits[i].fiber);
    }
    farce_fd_table_mark(&s->fds);
}

static void sel_free(void *p)
{
    farce_selector *s = p;
    if (s->handle && s->fork_generation == farce_fork_generation) farce_core_release_later(s->handle);
    xfree(s->waits);
    farce_fd_table_free(&s->fds);
    xfree(s->ring);
    xfree(s);
}

static size_t sel_memsize(const void *p)
{
    const farce_selector *s = p;
    return sizeof(*s) + s->nwaits * sizeof(sel_wait) + farce_fd_table_memsize(&s->fds) +
           (s->ring ? (s->mask + 1) * sizeof(VALUE) : 0);
}

static const rb_data_type_t sel_type = {
    "Farce::IOEventSelector",
    {sel_mark, sel_free, sel_memsize},
    0, 0, RUBY_TYPED_FREE_IMMEDIATELY
};

static VALUE sel_alloc(VALUE klass)
{
    farce_selector *s;
    VALUE obj = TypedData_Make_Struct(klass, farce_selector, &sel_type, s);
    s->loop = s->backend = Qnil;
    s->wake_fd = -1;
    return obj;
}

/* ---- helpers -------------------------------------------------------------- */

static int sel_inert(const farce_selector *s) { return s->fork_generation != farce_fork_generation; }

static farce_selector *get_sel(VALUE self)
{
    farce_selector *s = rb_check_typeddata(self, &sel_type);
    if (sel_inert(s)) {
        rb_raise(farce_eError, "this IO::Event::Selector::Farce was created before fork and is inert in the child; "
                 "create a new one (a new Async reactor) after fork");
    }
    if (s->closed) rb_raise(farce_eError, "selector is closed");
    return s;
}

/* Starts the Go core (and the Go runtime, the first time) on first need,
 * which is often inside a task's fiber: the stack check comes first. */
static void start_core(farce_selector *s)
{
    if (s->handle) return;
    farce_stack_guard();
    farce_core_load();
    farce_core_release_orphans();
    const char *env = getenv("FARCE_BACKEND");
    char name[64] = "", reason[512] = "";
    int wake_fd = -1;
    int64_t h = farce_core.new_(env && *env ? env : "auto", name, sizeof(name), reason, sizeof(reason), &wake_fd);
    if (h <= 0) rb_raise(farce_eError, "cannot start farce's core: %s", reason);
    s->handle = h;
    s->wake_fd = wake_fd;
    s->backend = ID2SYM(rb_intern(name));
}

static sel_wait *wait_at(farce_selector *s, uint32_t slot)
{
    if (slot >= s->nwaits) s->waits = farce_slot_table_grow(s->waits, &s->nwaits, slot, sizeof(sel_wait));
    return &s->waits[slot];
}

/* ---- the ready list ------------------------------------------------------- */

static uint64_t ready_push(farce_selector *s, VALUE obj)
{
    uint64_t cap = s->ring ? s->mask + 1 : 0;
    if (s->tail - s->head == cap) {
        uint64_t ncap = cap ? cap * 2 : 64;
        VALUE *n = ALLOC_N(VALUE, ncap);
        for (uint64_t pos = s->head; pos < s->tail; pos++) n[pos & (ncap - 1)] = s->ring[pos & s->mask];
        xfree(s->ring);
        s->ring = n;
        s->mask = ncap - 1;
    }
    uint64_t pos = s->tail++;
    s->ring[pos & s->mask] = obj;
    return pos;
}

/* Clears the entry pushed at pos if the loop has not taken it yet: the
 * fiber is running again by other means, and must not be transferred to
 * later from wherever it will be waiting then. */
static void ready_clear(farce_selector *s, uint64_t pos)
{
    if (pos >= s->head && pos < s->tail) s->ring[pos & s->mask] = Qnil;
}

static int ready_any(const farce_selector *s) { return s->tail != s->head; }

/* Transfers to every entry that was queued when this started; entries
 * pushed meanwhile wait for the next select. Returns whether there were any. */
static int run_ready(farce_selector *s)
{
    uint64_t end = s->tail;
    if (s->head == end) return 0;
    while (s->head < end && s->ring) {
        uint64_t pos = s->head++;
        VALUE obj = s->ring[pos & s->mask];
        s->ring[pos & s->mask] = Qnil;
        if (NIL_P(obj)) continue;
        if (rb_obj_is_fiber(obj)) {
            if (RTEST(rb_fiber_alive_p(obj))) rb_fiber_transfer(obj, 0, NULL);
        } else if (RTEST(rb_funcall(obj, id_alive_p, 0))) {
            rb_funcall(obj, id_transfer, 0);
        }
        if (s->closed) break;
    }
    return 1;
}

/* ---- waiting -------------------------------------------------------------- */

static VALUE transfer_to_loop(VALUE self)
{
    farce_selector *s = rb_check_typeddata(self, &sel_type);
    return rb_fiber_transfer(s->loop, 0, NULL);
}

/* Waits on token until someone transfers back. Sets *by_loop when the loop
 * resumed it because the wait finished (the value is then the Fixnum
 * result); otherwise the wait is cancelled and whatever value the other
 * party transferred is returned. An exception raised into the fiber cancels
 * the wait and propagates. */
static VALUE park(VALUE self, farce_selector *s, uint64_t token, int *by_loop)
{
    uint32_t slot = farce_token_slot(token), gen = farce_token_gen(token);
    VALUE fiber = rb_fiber_current();
    sel_wait *w = wait_at(s, slot);
    w->gen = gen;
    w->fiber = fiber;
    s->fd_waiting++;

    int state = 0;
    VALUE v = rb_protect(transfer_to_loop, self, &state);
    w = &s->waits[slot];
    *by_loop = 0;
    if (w->gen == gen && w->fiber == fiber) {
        memset(w, 0, sizeof(*w));
        s->fd_waiting--;
        /* same stack depth as the wait_fd call that passed the stack check */
        if (s->handle && !sel_inert(s)) farce_core.cancel(s->handle, token);
    } else if (!state) {
        *by_loop = 1;
    }
    if (state) rb_jump_tag(state);
    return v;
}

/* Waits for events on fd. Returns ready events (>0), or 0 when another
 * fiber transferred here first (then *other holds what it passed). Raises
 * IOError when the descriptor was closed meanwhile. */
static int64_t wait_fd(VALUE self, farce_selector *s, int fd, uint32_t events, int known, VALUE *other)
{
    uint64_t token = 0;
    start_core(s);
    farce_stack_guard();
    int64_t r = farce_core.wait_fd(s->handle, fd, events, -1, known, &token);
    if (r > 0) return r;
    if (r < 0) farce_raise_core_error(s->handle, r, "wait on descriptor", s->backend);
    int by_loop;
    VALUE v = park(self, s, token, &by_loop);
    if (!by_loop) {
        if (other) *other = v;
        return 0;
    }
    long result = FIX2LONG(v);
    if (result == FARCE_RESULT_CLOSED) rb_raise(rb_eIOError, "closed stream");
    if (result <= 0) {
        if (other) *other = Qfalse;
        return 0;
    }
    return result;
}

/* ---- the loop ------------------------------------------------------------- */

static void dispatch_batch(farce_selector *s)
{
    while (s->batch_pos < s->batch_len) {
        farce_completion c = s->batch[s->batch_pos++];
        uint32_t slot = farce_token_slot(c.token);
        if (slot >= s->nwaits) continue;
        sel_wait *w = &s->waits[slot];
        if (w->gen != farce_token_gen(c.token) || !w->fiber) continue; /* cancelled meanwhile */
        VALUE fiber = w->fiber;
        memset(w, 0, sizeof(*w));
        s->fd_waiting--;
        VALUE arg = LONG2FIX((long)c.result);
        rb_fiber_transfer(fiber, 1, &arg); /* may raise: the cursor is already past c */
        if (s->closed) return;
    }
}

/* Ruby before 4.0 tells a scheduler nothing when an IO is closed: every
 * SEL_CLOSE_SCAN_NS the loop drops descriptors whose IO was closed, which
 * wakes their waiters with IOError instead of leaving them parked forever. */
static void scan_closed(farce_selector *s)
{
    if (!s->fd_waiting) return;
    int64_t now = farce_monotonic_ns();
    if (now - s->last_scan < SEL_CLOSE_SCAN_NS) return;
    s->last_scan = now;
    farce_fd_table_forget_closed(&s->fds, s->handle);
}

/* Seconds (nil: forever) to nanoseconds; -1 means no bound. */
static int64_t duration_ns(VALUE duration)
{
    if (NIL_P(duration)) return -1;
    double d = NUM2DBL(duration);
    if (d != d || d < 0) return 0;
    if (d > 9.0e9) return -1;
    return (int64_t)(d * 1e9);
}

/* call-seq: select(duration = nil) -> count of fibers resumed for events
 * Runs the ready list, then waits up to duration (not at all when something
 * is ready) for descriptor events and transfers to their fibers. */
static VALUE sel_select(int argc, VALUE *argv, VALUE self)
{
    farce_selector *s = get_sel(self);
    rb_check_arity(argc, 0, 1);
    int64_t block_ns = duration_ns(argc ? argv[0] : Qnil);
    long resumed = 0;

    /* completions taken by a select that an exception cut short */
    int left = s->batch_len - s->batch_pos;
    dispatch_batch(s);
    if (s->closed) return INT2FIX(0);
    if (run_ready(s) || left > 0) block_ns = 0;
    if (s->closed) return INT2FIX(0);
    if (!s->handle) {
        /* no core yet, so nothing waits on it: there is only something to
         * do when this select has to wait (for a wakeup or the duration) */
        if (block_ns == 0 || ready_any(s)) return INT2FIX(0);
        start_core(s);
    }

    farce_stack_guard();
    scan_closed(s);
    s->idle_duration = 0.0;
    for (int round = 0; round < SEL_POLL_ROUNDS; round++) {
        int64_t n = farce_core.poll(s->handle, 0, s->batch, SEL_BATCH);
        if (n == 0 && round == 0 && block_ns != 0 && !ready_any(s)) {
            if (s->fd_waiting && (block_ns < 0 || block_ns > SEL_CLOSE_SCAN_NS)) block_ns = SEL_CLOSE_SCAN_NS;
            int64_t t0 = farce_monotonic_ns();
            s->blocked = 1;
            n = farce_poll_without_gvl(s->handle, &s->wake_fd, block_ns, s->batch, SEL_BATCH);
            s->blocked = 0;
            s->idle_duration = (double)(farce_monotonic_ns() - t0) / 1e9;
            if (n > 0) {
                s->batch_pos = 0;
                s->batch_len = (int)n;
            }
            rb_thread_check_ints(); /* Thread#raise, traps: may raise, the batch is kept */
        }
        if (n == -EINTR) {
            rb_thread_check_ints();
            break;
        }
        if (n < 0) farce_raise_core_error(s->handle, n, "poll", s->backend);
        s->batch_pos = 0;
        s->batch_len = (int)n;
        resumed += n;
        dispatch_batch(s);
        if (s->closed || n < SEL_BATCH) break;
    }
    return LONG2NUM(resumed);
}

/* ---- the io-event interface ----------------------------------------------- */

/* call-seq: new(loop_fiber) */
static VALUE sel_initialize(VALUE self, VALUE loop)
{
    farce_selector *s = rb_check_typeddata(self, &sel_type);
    if (!NIL_P(s->loop) || s->closed) rb_raise(farce_eError, "selector already initialized");
    farce_core_check_usable(); /* fail here, not at the first wait, in a child that can never use Go */
    s->fork_generation = farce_fork_generation;
    s->loop = loop;
    return self;
}

static VALUE sel_loop(VALUE self) { return ((farce_selector *)rb_check_typeddata(self, &sel_type))->loop; }

/* call-seq: backend -> :io_uring, :epoll or :poll
 * Asking starts the core, which is what picks the backend. */
static VALUE sel_backend(VALUE self)
{
    farce_selector *s = get_sel(self);
    start_core(s);
    return s->backend;
}

static VALUE sel_idle_duration(VALUE self)
{
    return DBL2NUM(((farce_selector *)rb_check_typeddata(self, &sel_type))->idle_duration);
}

/* call-seq: close -> nil
 * Releases the Go scheduler; waiting fibers are forgotten. In a forked
 * child only C memory is touched (no Go call, no descriptor closed). */
static VALUE sel_close(VALUE self)
{
    farce_selector *s = rb_check_typeddata(self, &sel_type);
    if (s->handle && !sel_inert(s)) {
        farce_stack_guard();
        farce_core.close(s->handle);
    }
    s->handle = 0;
    s->closed = 1;
    s->loop = Qnil;
    if (s->waits) memset(s->waits, 0, s->nwaits * sizeof(sel_wait));
    farce_fd_table_clear(&s->fds);
    s->head = s->tail = 0;
    s->batch_pos = s->batch_len = 0;
    s->fd_waiting = 0;
    return Qnil;
}

static VALUE sel_closed_p(VALUE self)
{
    farce_selector *s = rb_check_typeddata(self, &sel_type);
    return (s->closed || sel_inert(s)) ? Qtrue : Qfalse;
}

/* call-seq: wakeup -> true if the loop was in its kernel wait
 * Safe from any thread (callers hold the GVL, as for push). */
static VALUE sel_wakeup(VALUE self)
{
    farce_selector *s = rb_check_typeddata(self, &sel_type);
    if (!s->handle || sel_inert(s) || !s->blocked) return Qfalse;
    farce_write_wake(&s->wake_fd);
    return Qtrue;
}

/* call-seq: transfer -> whatever the loop passes back */
static VALUE sel_transfer(VALUE self)
{
    farce_selector *s = get_sel(self);
    return rb_fiber_transfer(s->loop, 0, NULL);
}

struct switch_args {
    VALUE self;
    int kind; /* 0: transfer to target, 1: raise in target, 2: transfer to loop */
    VALUE target;
    int argc;
    const VALUE *argv;
    int kw; /* raise: the caller passed keywords (cause:) */
    uint64_t pos;
};

static VALUE do_switch(VALUE p)
{
    struct switch_args *a = (struct switch_args *)p;
    switch (a->kind) {
    case 0: return rb_fiber_transfer(a->target, a->argc, a->argv);
    case 1: return rb_funcallv_kw(a->target, id_raise, a->argc, a->argv, a->kw);
    default: return rb_fiber_transfer(a->target, 0, NULL);
    }
}

static VALUE unqueue(VALUE p)
{
    struct switch_args *a = (struct switch_args *)p;
    farce_selector *s = rb_check_typeddata(a->self, &sel_type);
    ready_clear(s, a->pos);
    return Qnil;
}

/* Queues the current fiber to be transferred to by the loop, switches as
 * asked, and removes the queue entry if it was not used by the time this
 * fiber runs again. */
static VALUE switch_queued(VALUE self, int kind, VALUE target, int argc, const VALUE *argv)
{
    farce_selector *s = get_sel(self);
    struct switch_args a = {self, kind, target, argc, argv, rb_keyword_given_p(), 0};
    a.pos = ready_push(s, rb_fiber_current());
    return rb_ensure(do_switch, (VALUE)&a, unqueue, (VALUE)&a);
}

/* call-seq: resume(fiber, *arguments) */
static VALUE sel_resume(int argc, VALUE *argv, VALUE self)
{
    rb_check_arity(argc, 1, UNLIMITED_ARGUMENTS);
    return switch_queued(self, 0, argv[0], argc - 1, argv + 1);
}

/* call-seq: yield -> nil (runs again on the next select) */
static VALUE sel_yield(VALUE self)
{
    farce_selector *s = get_sel(self);
    return switch_queued(self, 2, s->loop, 0, NULL);
}

/* call-seq: raise(fiber, *arguments) */
static VALUE sel_raise(int argc, VALUE *argv, VALUE self)
{
    rb_check_arity(argc, 1, UNLIMITED_ARGUMENTS);
    return switch_queued(self, 1, argv[0], argc - 1, argv + 1);
}

/* call-seq: push(fiber) -> nil
 * Anything answering alive? and transfer may be queued. */
static VALUE sel_push(VALUE self, VALUE fiber)
{
    farce_selector *s = get_sel(self);
    ready_push(s, fiber);
    return Qnil;
}

static VALUE sel_ready_p(VALUE self)
{
    farce_selector *s = rb_check_typeddata(self, &sel_type);
    return ready_any(s) ? Qtrue : Qfalse;
}

#define EVENT_MASK (RUBY_IO_READABLE | RUBY_IO_PRIORITY | RUBY_IO_WRITABLE)

/* call-seq: io_wait(fiber, io, events) -> ready events, or what another
 * fiber passed when it transferred here first (Async's timers pass nil). */
static VALUE sel_io_wait(VALUE self, VALUE fiber, VALUE io, VALUE events)
{
    farce_selector *s = get_sel(self);
    io = rb_io_get_io(io);
    int fd = farce_io_descriptor(io);
    int ev = NUM2INT(events) & EVENT_MASK;
    if (ev == 0) rb_raise(rb_eArgError, "io_wait: no events to wait for on fd %d", fd);
    farce_fd_ent *f = farce_fd_table_entry(&s->fds, s->handle, s->backend, io, fd);
    if (!f->pollable) return INT2NUM(ev);
    VALUE other = Qfalse;
    int64_t r = wait_fd(self, s, fd, (uint32_t)ev, FARCE_KNOWN_UNKNOWN, &other);
    return r > 0 ? LL2NUM(r & ev) : other;
}

static VALUE neg_errno(int e) { return INT2NUM(-e); }

enum xfer_dir { XFER_READ, XFER_WRITE };

/* The loop behind io_read, io_write, io_pread and io_pwrite: moves at least
 * `length` bytes between buffer[offset...] and fd (one successful call when
 * length is 0), at file position `from`, or at the stream's position when
 * from < 0. Returns the count, or -errno when nothing moved; a read stops
 * early at end of file. A stream read is not tried when the last one
 * drained the stream (it waits first), and a blocking descriptor is waited
 * on before every call, so it never blocks the loop. */
static VALUE xfer(VALUE self, VALUE io, VALUE buffer, size_t length, size_t offset, off_t from, enum xfer_dir dir)
{
    farce_selector *s = get_sel(self);
    io = rb_io_get_io(io);
    int fd = farce_io_descriptor(io);
    int reading = dir == XFER_READ;
    int events = reading ? RUBY_IO_READABLE : RUBY_IO_WRITABLE;
    size_t total = 0;
    int waited = 0; /* the last step was a wait: try the call now, whatever we knew before */
    for (;;) {
        void *base;
        size_t size;
        if (reading) {
            rb_io_buffer_get_bytes_for_writing(buffer, &base, &size);
        } else {
            const void *readable;
            rb_io_buffer_get_bytes_for_reading(buffer, &readable, &size);
            base = (void *)(uintptr_t)readable; /* only ever passed to write(2)/pwrite(2) */
        }
        if (offset > size || length > size - offset) return neg_errno(EINVAL);
        size_t room = size - offset - total;
        if (room == 0) return SIZET2NUM(total);
        farce_fd_ent *f = farce_fd_table_entry(&s->fds, s->handle, s->backend, io, fd);
        int drained = reading && from < 0 && f->drained;
        if (!waited && f->pollable && (drained || f->blocking)) {
            if (drained) f->drained = 0;
            wait_fd(self, s, fd, events, drained ? FARCE_KNOWN_DRAINED : FARCE_KNOWN_UNKNOWN, NULL);
            waited = 1;
            continue;
        }
        waited = 0;
        char *at = (char *)base + offset + total;
        off_t pos = from + (off_t)total;
        ssize_t n = reading ? (from < 0 ? read(fd, at, room) : pread(fd, at, room, pos))
                            : (from < 0 ? write(fd, at, room) : pwrite(fd, at, room, pos));
        if (n > 0 || (n == 0 && !reading)) {
            total += (size_t)n;
            if (reading && from < 0) {
                f = &s->fds.fds[fd]; /* a wait may have grown the table */
                f->drained = f->stream && (size_t)n < room;
            }
            if (total >= length) return SIZET2NUM(total);
            continue;
        }
        if (n == 0) return SIZET2NUM(total); /* end of file */
        int e = errno;
        if (e == EINTR) {
            rb_thread_check_ints();
            continue;
        }
        if (e == EAGAIN || e == EWOULDBLOCK) {
            wait_fd(self, s, fd, events, FARCE_KNOWN_NOT_READY, NULL);
            waited = 1;
            continue;
        }
        return total ? SIZET2NUM(total) : neg_errno(e);
    }
}

/* call-seq: io_read(fiber, io, buffer, length, offset = 0) -> count or -errno */
static VALUE sel_io_read(int argc, VALUE *argv, VALUE self)
{
    rb_check_arity(argc, 4, 5);
    return xfer(self, argv[1], argv[2], NUM2SIZET(argv[3]), argc > 4 ? NUM2SIZET(argv[4]) : 0, -1, XFER_READ);
}

/* call-seq: io_write(fiber, io, buffer, length, offset = 0) -> count or -errno */
static VALUE sel_io_write(int argc, VALUE *argv, VALUE self)
{
    rb_check_arity(argc, 4, 5);
    return xfer(self, argv[1], argv[2], NUM2SIZET(argv[3]), argc > 4 ? NUM2SIZET(argv[4]) : 0, -1, XFER_WRITE);
}

/* Positional calls are for files, which have no readiness to wait for, so
 * they run directly (Ruby 3.3 routes IO#pread and IO#pwrite here). A
 * negative position gets -EINVAL, as from pread(2). */

/* call-seq: io_pread(fiber, io, buffer, from, length, offset) -> count or -errno */
static VALUE sel_io_pread(VALUE self, VALUE fiber, VALUE io, VALUE buffer, VALUE from, VALUE length, VALUE offset)
{
    off_t pos = NUM2OFFT(from);
    if (pos < 0) return neg_errno(EINVAL);
    return xfer(self, io, buffer, NUM2SIZET(length), NUM2SIZET(offset), pos, XFER_READ);
}

/* call-seq: io_pwrite(fiber, io, buffer, from, length, offset) -> count or -errno */
static VALUE sel_io_pwrite(VALUE self, VALUE fiber, VALUE io, VALUE buffer, VALUE from, VALUE length, VALUE offset)
{
    off_t pos = NUM2OFFT(from);
    if (pos < 0) return neg_errno(EINVAL);
    return xfer(self, io, buffer, NUM2SIZET(length), NUM2SIZET(offset), pos, XFER_WRITE);
}

/* call-seq: io_close(io_or_descriptor) -> nil
 * Ruby 4.0 calls this before closing a descriptor: drop it in Go now (its
 * waiters raise IOError) so the number can be reused at once. */
static VALUE sel_io_close(VALUE self, VALUE target)
{
    farce_selector *s = rb_check_typeddata(self, &sel_type);
    if (!s->handle || sel_inert(s)) return Qnil;
    int fd = RB_INTEGER_TYPE_P(target) ? NUM2INT(target) : farce_io_fd_or_closed(rb_io_get_io(target));
    if (fd < 0 || fd >= s->fds.nfds || !s->fds.fds[fd].io) return Qnil;
    farce_stack_guard();
    farce_fd_table_forget(&s->fds, s->handle, fd);
    return Qnil;
}

/* process_wait: a pidfd becomes readable when the child exits. */
struct pidfd_wait {
    VALUE self;
    farce_selector *s;
    int pidfd;
    VALUE other;
};

static VALUE pidfd_wait_body(VALUE p)
{
    struct pidfd_wait *w = (struct pidfd_wait *)p;
    return wait_fd(w->self, w->s, w->pidfd, RUBY_IO_READABLE, FARCE_KNOWN_UNKNOWN, &w->other) > 0 ? Qtrue : Qfalse;
}

static VALUE pidfd_wait_done(VALUE p)
{
    struct pidfd_wait *w = (struct pidfd_wait *)p;
    if (w->s->handle && !sel_inert(w->s)) farce_core.forget_fd(w->s->handle, w->pidfd);
    close(w->pidfd);
    return Qnil;
}

static VALUE process_status_wait(VALUE pid, int flags)
{
    VALUE cStatus = rb_path2class("Process::Status");
    return rb_funcall(cStatus, id_wait, 2, pid, INT2NUM(flags));
}

/* call-seq: process_wait(fiber, pid, flags) -> Process::Status, nil (WNOHANG),
 * or false when another fiber transferred here first (Async retries). */
static VALUE sel_process_wait(VALUE self, VALUE fiber, VALUE pid_v, VALUE flags_v)
{
    farce_selector *s = get_sel(self);
    int pid = NUM2INT(pid_v), flags = NUM2INT(flags_v);
    if (flags & WNOHANG) return process_status_wait(pid_v, flags);
    long pidfd = -1;
#ifdef SYS_pidfd_open
    if (pid > 0) pidfd = syscall(SYS_pidfd_open, (pid_t)pid, 0);
#endif
    if (pidfd < 0) {
        /* any child, a process group, or no pidfd: a thread does the wait */
        VALUE mSelector = rb_path2class("IO::Event::Selector");
        return rb_funcall(mSelector, id_process_wait, 2, pid_v, flags_v);
    }
    fcntl((int)pidfd, F_SETFD, FD_CLOEXEC);
    /* a stale entry for this number belongs to a closed IO: drop it in Go */
    if (pidfd < s->fds.nfds && s->fds.fds[pidfd].io) {
        farce_stack_guard();
        farce_fd_table_forget(&s->fds, s->handle, (int)pidfd);
    }
    struct pidfd_wait w = {self, s, (int)pidfd, Qfalse};
    VALUE exited = rb_ensure(pidfd_wait_body, (VALUE)&w, pidfd_wait_done, (VALUE)&w);
    if (!RTEST(exited)) return RTEST(w.other) ? w.other : Qfalse;
    return process_status_wait(pid_v, flags | WNOHANG);
}

void farce_selector_init(VALUE mFarce)
{
    id_alive_p = rb_intern("alive?");
    id_transfer = rb_intern("transfer");
    id_raise = rb_intern("raise");
    id_process_wait = rb_intern("process_wait");
    id_wait = rb_intern("wait");
    cSelector = rb_define_class_under(mFarce, "IOEventSelector", rb_cObject);
    rb_define_alloc_func(cSelector, sel_alloc);
    rb_define_method(cSelector, "initialize", sel_initialize, 1);
    rb_define_method(cSelector, "loop", sel_loop, 0);
    rb_define_method(cSelector, "backend", sel_backend, 0);
    rb_define_method(cSelector, "idle_duration", sel_idle_duration, 0);
    rb_define_method(cSelector, "close", sel_close, 0);
    rb_define_method(cSelector, "closed?", sel_closed_p, 0);
    rb_define_method(cSelector, "wakeup", sel_wakeup, 0);
    rb_define_method(cSelector, "transfer", sel_transfer, 0);
    rb_define_method(cSelector, "resume", sel_resume, -1);
    rb_define_method(cSelector, "yield", sel_yield, 0);
    rb_define_method(cSelector, "raise", sel_raise, -1);
    rb_define_method(cSelector, "push", sel_push, 1);
    rb_define_method(cSelector, "ready?", sel_ready_p, 0);
    rb_define_method(cSelector, "select", sel_select, -1);
    rb_define_method(cSelector, "io_wait", sel_io_wait, 3);
    rb_define_method(cSelector, "io_read", sel_io_read, -1);
    rb_define_method(cSelector, "io_write", sel_io_write, -1);
    rb_define_method(cSelector, "io_pread", sel_io_pread, 6);
    rb_define_method(cSelector, "io_pwrite", sel_io_pwrite, 6);
    rb_define_method(cSelector, "io_close", sel_io_close, 1);
    rb_define_method(cSelector, "process_wait", sel_process_wait, 3);
}
