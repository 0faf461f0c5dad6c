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
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include "loop/fd_table.h"
#include "core_access/core_door.h"
#include "loop/ruby_io.h"

static ID id_aref, id_aset;
static VALUE cWeakMap;

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
    if (!t->alive) {
        if (!cWeakMap) {
            cWeakMap = rb_const_get(rb_const_get(rb_cObject, rb_intern("ObjectSpace")), rb_intern("WeakMap"));
            rb_gc_register_mark_object(cWeakMap);
            id_aref = rb_intern("[]");
            id_aset = rb_intern("[]=");
        }
        t->alive = rb_class_new_instance(0, NULL, cWeakMap);
    }
    return t->alive;
}

/* What to remember in gc_seen when f->io was just seen alive: the GC
 * count, or NEVER_SEEN while a GC is marking (see the top of this file).
 * Only recording asks for the GC's state; the checks compare counts. */
#define NEVER_SEEN SIZE_MAX
static size_t seen_now(void)
{
    static VALUE sym_state, sym_marking;
    if (!sym_state) {
        sym_state = ID2SYM(rb_intern("state"));
        sym_marking = ID2SYM(rb_intern("marking"));
    }
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

#ifndef _WIN32
/* What names the open file behind a number without holding it: the inode
 * (st_dev, st_ino) and the access mode (a pipe's two ends share an inode).
 * Sockets and pipes get an inode each; files that share one (the anonymous
 * inode of eventfd, timerfd, ...; a FIFO or device opened twice) look the
 * same to it, and so are taken for the same file. Zero: not known. */
static void file_identity(const struct stat *st, int ok, int flags, uint64_t *dev, uint64_t *ino)
{
    if (!ok) {
        *dev = *ino = 0;
        return;
    }
    *dev = (uint64_t)st->st_dev ^ ((uint64_t)(flags >= 0 ? (flags & O_ACCMODE) + 1 : 0) << 61);
    *ino = (uint64_t)st->st_ino;
}

static void set_file(farce_fd_table *t, int64_t handle, VALUE backend, int fd, uint64_t dev, uint64_t ino)
{
    int64_t r = farce_core_set_fd_file(t->core, handle, fd, dev, ino);
    if (r < 0) farce_core_raise(t->core, handle, r, "tell which file a descriptor names", backend);
}

int farce_fd_file_now(int fd, uint64_t *dev, uint64_t *ino)
{
    struct stat st;
    int flags = fcntl(fd, F_GETFL);
    int ok = fstat(fd, &st) == 0;
    file_identity(&st, ok, flags, dev, ino);
    return ok;
}
#endif

unsigned long farce_fd_reopens;

static VALUE descriptors_reopened(VALUE mod)
{
    farce_fd_reopens++;
    return Qnil;
}

void farce_fd_table_init(VALUE mFarce)
{
    rb_define_singleton_method(mFarce, "__descriptors_reopened", descriptors_reopened, 0);
}

#ifndef _WIN32
/* The file facts that decide how to read (fd_table.h). */
static void read_facts(farce_fd_ent *f, const struct stat *st, int stat_ok, int flags)
{
    f->drained = 0;
    f->read_with_op = 0;
    f->blocking = flags >= 0 && !(flags & O_NONBLOCK);
    if (stat_ok) {
        f->stream = S_ISSOCK(st->st_mode) || S_ISFIFO(st->st_mode);
        f->socket = S_ISSOCK(st->st_mode);
        f->pollable = !S_ISREG(st->st_mode) && !S_ISDIR(st->st_mode);
    } else {
        f->stream = f->socket = 0;
        f->pollable = 1;
    }
}

/* The same IO after an IO#reopen somewhere in the process: when its file
 * is another now, the core drops the old file's registration and waiters
 * (they wake with IOError) and the facts are read again. */
static void recheck_file(farce_fd_table *t, int64_t handle, VALUE backend, farce_fd_ent *f, int fd)
{
    f->reopens = farce_fd_reopens;
    struct stat st;
    int flags = fcntl(fd, F_GETFL);
    int stat_ok = fstat(fd, &st) == 0;
    uint64_t dev, ino;
    file_identity(&st, stat_ok, flags, &dev, &ino);
    if (dev == f->dev && ino == f->ino) return;
    if (handle) {
        if (t->ndeferred) farce_fd_table_start_deferred(t, handle);
        if (!f->file_told) set_file(t, handle, backend, fd, f->dev, f->ino);
        set_file(t, handle, backend, fd, dev, ino);
    }
    f->dev = dev;
    f->ino = ino;
    f->file_told = handle != 0;
    read_facts(f, &st, stat_ok, flags);
}

#endif

farce_fd_ent *farce_fd_table_entry_slow(farce_fd_table *t, int64_t handle, VALUE backend, VALUE io, int fd)
{
    check_fd(fd);
    grow(t, fd);
    farce_fd_ent *f = &t->fds[fd];
    if (same_io(f, io)) {
#ifndef _WIN32
        if (f->reopens != farce_fd_reopens) recheck_file(t, handle, backend, f, fd);
#endif
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
#ifdef _WIN32
    f->io = io;
    f->io_id = FIXNUM_P(id) ? id : Qfalse; /* never a Bignum on 64-bit hosts; Qfalse: checked each GC */
    f->gc_seen = seen_now();
    f->drained = 0;
    f->read_with_op = 0;
    /* Only a socket can be waited on (the IOCP driver polls sockets through
     * AFD). It is made non-blocking here, as Ruby on Linux makes every
     * socket, so that a recv or send never blocks the loop; Ruby's own
     * calls on it then wait for readiness when it is not ready. A SOCKET
     * value is not reused while its socket is open, so the number names
     * its file and no identity needs telling. */
    f->socket = f->stream = f->pollable = rb_w32_is_socket(fd) != 0;
    f->blocking = !f->socket;
    if (f->socket) rb_w32_set_nonblock(fd);
#else
    struct stat st;
    int flags = fcntl(fd, F_GETFL);
    int stat_ok = fstat(fd, &st) == 0;
    if (handle) {
        /* Another IO presents the number: it may name another open file by
         * now, one that C code (libmariadb, ...) got after it close(2)d or
         * dup2(2)ed the old one behind the old IO's back. The core compares
         * and, when it changed, wakes the old file's waiters with IOError and
         * arms the new file afresh: a registration belongs to the file it was
         * made for. The same IO again never gets here (the check above). */
        if (t->ndeferred) farce_fd_table_start_deferred(t, handle);
        /* the old IO came before the core (the selector starts it on first
         * need): the core learns the old file first, to compare */
        if (f->io && shared && !f->file_told) set_file(t, handle, backend, fd, f->dev, f->ino);
    }
    file_identity(&st, stat_ok, flags, &f->dev, &f->ino);
    f->file_told = handle != 0;
    f->reopens = farce_fd_reopens;
    if (handle) set_file(t, handle, backend, fd, f->dev, f->ino);
    f->io = io;
    f->io_id = FIXNUM_P(id) ? id : Qfalse; /* never a Bignum on 64-bit hosts; Qfalse: checked each GC */
    f->gc_seen = seen_now();
    read_facts(f, &st, stat_ok, flags);
#endif
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
