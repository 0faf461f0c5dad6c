/*
 * Descriptor identity for the front ends; see fd_table.h.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include "fd_table.h"
#include "core_calls.h"
#include "ruby_io.h"

static void grow(farce_fd_table *t, int fd)
{
    if (fd < t->nfds) return;
    int n = t->nfds ? t->nfds : 64;
    while (n <= fd) n *= 2;
    REALLOC_N(t->fds, farce_fd_ent, n);
    memset(t->fds + t->nfds, 0, (n - t->nfds) * sizeof(farce_fd_ent));
    t->nfds = n;
}

farce_fd_ent *farce_fd_table_entry(farce_fd_table *t, int64_t handle, VALUE backend, VALUE io, int fd)
{
    grow(t, fd);
    farce_fd_ent *f = &t->fds[fd];
    if (f->io == io) return f;
    int shared = f->io && farce_io_fd_or_closed(f->io) == fd; /* two IOs, one open descriptor */
    if (f->io && !shared && handle) { /* no handle: no core yet, nothing registered there */
        farce_stack_guard();
        int64_t r = farce_core.forget_fd(handle, fd);
        if (r < 0) farce_raise_core_error(handle, r, "forget descriptor", backend);
    }
    struct stat st;
    int flags = fcntl(fd, F_GETFL);
    f->io = io;
    f->drained = 0;
    f->async = 0;
    f->blocking = flags >= 0 && !(flags & O_NONBLOCK);
    if (fstat(fd, &st) == 0) {
        f->stream = S_ISSOCK(st.st_mode) || S_ISFIFO(st.st_mode);
        f->pollable = !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode);
    } else {
        f->stream = 0;
        f->pollable = 1;
    }
    return f;
}

void farce_fd_table_forget_closed(farce_fd_table *t, int64_t handle)
{
    for (int fd = 0; fd < t->nfds; fd++) {
        VALUE io = t->fds[fd].io;
        if (io && farce_io_fd_or_closed(io) != fd) farce_fd_table_forget(t, handle, fd);
    }
}

void farce_fd_table_forget(farce_fd_table *t, int64_t handle, int fd)
{
    if (handle) farce_core.forget_fd(handle, fd);
    if (fd >= 0 && fd < t->nfds) memset(&t->fds[fd], 0, sizeof(farce_fd_ent));
}

void farce_fd_table_mark(const farce_fd_table *t)
{
    for (int fd = 0; fd < t->nfds; fd++) {
        if (t->fds[fd].io) rb_gc_mark(t->fds[fd].io);
    }
}

void farce_fd_table_clear(farce_fd_table *t)
{
    if (t->nfds) memset(t->fds, 0, t->nfds * sizeof(farce_fd_ent));
}

void farce_fd_table_free(farce_fd_table *t)
{
    xfree(t->fds);
    t->fds = NULL;
    t->nfds = 0;
}

size_t farce_fd_table_memsize(const farce_fd_table *t) { return t->nfds * sizeof(farce_fd_ent); }
