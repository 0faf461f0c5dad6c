/*
 * The descriptor table's file facts on Linux (and other POSIX systems); see
 * fd_table.h.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <fcntl.h>
#include <sys/stat.h>
#include "loop/fd_table.h"

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

/* The file facts that decide how to read (fd_table.h). A file fstat cannot
 * answer for is taken for a terminal: waited on, never read before it is
 * known ready when it blocks. */
static void read_facts(farce_fd_ent *f, const struct stat *st, int stat_ok, int flags)
{
    f->drained = 0;
    f->read_with_op = 0;
    f->blocking = flags >= 0 && !(flags & O_NONBLOCK);
    f->kind = !stat_ok                                      ? FARCE_FD_TERMINAL
              : S_ISSOCK(st->st_mode)                       ? FARCE_FD_SOCKET
              : S_ISFIFO(st->st_mode)                       ? FARCE_FD_PIPE
              : S_ISREG(st->st_mode) || S_ISDIR(st->st_mode) ? FARCE_FD_FILE
                                                            : FARCE_FD_TERMINAL;
    f->stream = f->kind == FARCE_FD_SOCKET || f->kind == FARCE_FD_PIPE;
    f->socket = f->kind == FARCE_FD_SOCKET;
    f->pollable = f->kind != FARCE_FD_FILE;
}

void farce_fd_file_recheck(farce_fd_table *t, int64_t handle, VALUE backend, farce_fd_ent *f, int fd)
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

void farce_fd_file_take(farce_fd_table *t, int64_t handle, VALUE backend, farce_fd_ent *f, int fd, int shared)
{
    struct stat st;
    int flags = fcntl(fd, F_GETFL);
    int stat_ok = fstat(fd, &st) == 0;
    if (handle) {
        /* Another IO presents the number: it may name another open file by
         * now, one that C code (libmariadb, ...) got after it close(2)d or
         * dup2(2)ed the old one behind the old IO's back. The core compares
         * and, when it changed, wakes the old file's waiters with IOError and
         * arms the new file afresh: a registration belongs to the file it was
         * made for. The same IO again never gets here (fd_table.c). */
        if (t->ndeferred) farce_fd_table_start_deferred(t, handle);
        /* the old IO came before the core (the selector starts it on first
         * need): the core learns the old file first, to compare */
        if (shared && !f->file_told) set_file(t, handle, backend, fd, f->dev, f->ino);
    }
    file_identity(&st, stat_ok, flags, &f->dev, &f->ino);
    f->file_told = handle != 0;
    f->reopens = farce_fd_reopens;
    if (handle) set_file(t, handle, backend, fd, f->dev, f->ino);
    read_facts(f, &st, stat_ok, flags);
}
