/*
 * Descriptor identity for the front ends; see fd_table.h.
 *
 * The table must not keep the IOs it saw alive: an IO dropped without
 * close is finalized by GC, which closes its descriptor (marking them
 * would leak every descriptor ever waited on, until EMFILE). So
 * an entry remembers its IO without marking it, and dereferences it only
 * while it is known alive:
 *
 *   - rb_gc_count() unchanged since the IO was last seen alive, outside a
 *     GC's marking: no object has been freed since, so the address still
 *     names that IO. (An IO seen alive while an incremental GC marks may
 *     still be dropped and left unmarked, then freed by that same GC's
 *     sweep with rb_gc_count() unchanged: such a sighting proves nothing.
 *     Ruby 3.4 crashed on it, a 4-byte String in the IO's old slot.)
 *   - otherwise the IO's object id is looked up in a WeakMap, which answers
 *     nil once the IO is garbage. A new object at a reused address has
 *     another id.
 *
 * The common case (the same IO waited on again with no GC in between)
 * costs one rb_gc_count() call.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <string.h>
#include "loop/fd_table.h"
#include "core_access/core_door.h"
#include "loop/ruby_io.h"

/* Set once, in Init (every Ractor's threads read them). */
static ID id_aref, id_aset;
static VALUE cWeakMap, sym_state, sym_marking;

static void grow(farce_fd_table *t, int fd)
{
    if (fd < t->nfds) return;
    int n = t->nfds ? t->nfds : 64;
    while (n <= fd) n *= 2; /* fd < FARCE_FD_MAX: no overflow */
    REALLOC_N(t->fds, farce_fd_ent, n);
    memset(t->fds + t->nfds, 0, (n - t->nfds) * sizeof(farce_fd_ent));
    t->nfds = n;
}

static void check_fd(int fd)
{
    if (fd < 0 || fd >= FARCE_FD_MAX) {
        rb_raise(farce_eError, "descriptor %d is outside the range farce can wait on (0...%d)", fd, FARCE_FD_MAX);
    }
}

static VALUE weak_map(farce_fd_table *t)
{
    if (!t->alive) t->alive = rb_class_new_instance(0, NULL, cWeakMap);
    return t->alive;
}

/* What to remember in gc_seen when f->io was just seen alive: the GC
 * count, or NEVER_SEEN while a GC is marking (see the top of this file).
 * Only recording asks for the GC's state; the checks compare counts. */
#define NEVER_SEEN SIZE_MAX
static size_t seen_now(void)
{
    return rb_gc_latest_gc_info(sym_state) == sym_marking ? NEVER_SEEN : rb_gc_count();
}

/* Whether f->io is still the live object it was: only then may it be
 * dereferenced. */
static int io_alive(farce_fd_table *t, farce_fd_ent *f)
{
    if (!f->io) return 0;
    if (f->gc_seen == rb_gc_count()) return 1;
    if (!t->alive || !FIXNUM_P(f->io_id) || rb_funcall(t->alive, id_aref, 1, f->io_id) != f->io) return 0;
    f->gc_seen = seen_now();
    return 1;
}

/* Whether f->io is io (alive: the caller holds it). */
static int same_io(farce_fd_ent *f, VALUE io)
{
    if (f->io != io) return 0;
    if (f->gc_seen == rb_gc_count()) return 1; /* nothing freed since: the address still names f's IO */
    if (rb_obj_id(io) != f->io_id) return 0; /* a new object where a collected one was */
    f->gc_seen = seen_now();
    return 1;
}

unsigned long farce_fd_reopens;

/* Any Ractor's thread may reopen an IO while the others' loops read the
 * count: the increment is atomic (a reopen is rare), the reads stay plain
 * (a word is never torn, and a loop that reads the count an instant late
 * looks at the file at its next wait). */
static VALUE descriptors_reopened(VALUE mod)
{
    __atomic_fetch_add(&farce_fd_reopens, 1, __ATOMIC_RELAXED);
    return Qnil;
}

void farce_fd_table_init(VALUE mFarce)
{
    cWeakMap = rb_const_get(rb_const_get(rb_cObject, rb_intern("ObjectSpace")), rb_intern("WeakMap"));
    rb_gc_register_mark_object(cWeakMap);
    id_aref = rb_intern("[]");
    id_aset = rb_intern("[]=");
    sym_state = ID2SYM(rb_intern("state"));
    sym_marking = ID2SYM(rb_intern("marking"));
    /* Ruby makes the symbols GC.latest_gc_info knows on its first call, one
     * static at a time and with no lock: two Ractors' first calls at once
     * had one see a half-made table and raise "unknown key: state" (4.0.5,
     * a Ractor's loop in test_ractors). Asked once here, before any Ractor
     * can start, the table is whole. */
    rb_gc_latest_gc_info(sym_state);
    rb_define_singleton_method(mFarce, "__descriptors_reopened", descriptors_reopened, 0);
}

farce_fd_steps farce_fd_steps_by_kind[FARCE_FD_KINDS][2];

static void choose_steps(const farce_fd_table *t, farce_fd_ent *f)
{
    f->steps = &farce_fd_steps_by_kind[f->kind][t->completion != 0];
}

void farce_fd_table_use_completion(farce_fd_table *t, int completion)
{
    t->completion = completion;
    for (int fd = 0; fd < t->nfds; fd++)
        if (t->fds[fd].io) choose_steps(t, &t->fds[fd]);
}

farce_fd_ent *farce_fd_table_entry_slow(farce_fd_table *t, int64_t handle, VALUE backend, VALUE io, int fd)
{
    check_fd(fd);
    grow(t, fd);
    farce_fd_ent *f = &t->fds[fd];
    if (same_io(f, io)) {
        if (f->reopens != farce_fd_reopens) {
            farce_fd_file_recheck(t, handle, backend, f, fd);
            choose_steps(t, f);
        }
        return f;
    }
    /* two IOs, one open descriptor (for_fd, autoclose off) */
    int shared = io_alive(t, f) && f->io != io && farce_io_fd_or_closed(f->io) == fd;
    if (f->io && !shared && handle) { /* no handle: no core yet, nothing registered there */
        if (t->ndeferred) farce_fd_table_start_deferred(t, handle);
        int64_t r = farce_core_forget_fd(t->core, handle, fd);
        if (r < 0) farce_core_raise(t->core, handle, r, "forget descriptor", backend);
    }
    VALUE id = rb_obj_id(io);
    VALUE alive = weak_map(t); /* first: it also sets id_aset */
    rb_funcall(alive, id_aset, 2, id, io);
    farce_fd_file_take(t, handle, backend, f, fd, shared);
    choose_steps(t, f);
    f->io = io;
    f->io_id = FIXNUM_P(id) ? id : Qfalse; /* never a Bignum on 64-bit hosts; Qfalse: checked each GC */
    f->gc_seen = seen_now();
    return f;
}

void farce_fd_table_forget_closed(farce_fd_table *t, int64_t handle)
{
    for (int fd = 0; fd < t->nfds; fd++) {
        farce_fd_ent *f = &t->fds[fd];
        if (!f->io) continue;
        if (!io_alive(t, f) || farce_io_fd_or_closed(f->io) != fd) farce_fd_table_forget(t, handle, fd);
    }
}

void farce_fd_table_forget(farce_fd_table *t, int64_t handle, int fd)
{
    if (handle) {
        /* both check the stack: io_close runs on the closing fiber's */
        if (t->ndeferred) farce_fd_table_start_deferred(t, handle);
        farce_core_forget_fd(t->core, handle, fd);
    }
    if (fd >= 0 && fd < t->nfds) memset(&t->fds[fd], 0, sizeof(farce_fd_ent));
}

void farce_raise_closed(int fd)
{
    rb_raise(rb_eIOError, "closed stream (descriptor %d was closed, or now names another open file)", fd);
}

void farce_fd_table_start_deferred(farce_fd_table *t, int64_t handle)
{
    if (!handle) return;
    if (farce_core_bind_waits(t->core, handle, t->deferred, t->ndeferred) == 0) t->ndeferred = 0;
}

void farce_fd_table_mark(const farce_fd_table *t)
{
    /* the IOs are deliberately not marked (see the top of this file) */
    if (t->alive) rb_gc_mark(t->alive);
}

void farce_fd_table_clear(farce_fd_table *t)
{
    if (t->nfds) memset(t->fds, 0, t->nfds * sizeof(farce_fd_ent));
    t->ndeferred = 0;
}

void farce_fd_table_free(farce_fd_table *t)
{
    xfree(t->fds);
    t->fds = NULL;
    t->nfds = 0;
    t->alive = 0;
}

size_t farce_fd_table_memsize(const farce_fd_table *t) { return t->nfds * sizeof(farce_fd_ent); }
