/*
 * Process.wait for both front ends: a pidfd (Linux 5.3+) becomes readable
 * when the child exits, so the loop waits on it like on any descriptor.
 * Where there is no pidfd (other systems, "any child" waits with pid <= 0),
 * the front end has a thread do the blocking waitpid (as always on Windows:
 * process_wait_windows.c).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <errno.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include "loop/event_loop.h"
#include "loop/wait_table.h"


struct pidfd_wait {
    farce_loop *l;
    VALUE pid, flags;
    int pidfd;
};

static VALUE status_wait(VALUE pid, int flags)
{
    return rb_funcall(rb_path2class("Process::Status"), rb_intern("wait"), 2, pid, INT2NUM(flags));
}

static VALUE pidfd_wait_body(VALUE p)
{
    struct pidfd_wait *w = (struct pidfd_wait *)p;
    for (;;) {
        int64_t r = farce_loop_wait_fd(w->l, w->pidfd, RUBY_IO_READABLE, -1, FARCE_KNOWN_NOTHING);
        if (r == FARCE_RESUMED_ELSEWHERE) return Qfalse;
        VALUE status = status_wait(w->pid, NUM2INT(w->flags) | WNOHANG);
        if (!NIL_P(status)) return status;
    }
}

static VALUE pidfd_wait_ensure(VALUE p)
{
    struct pidfd_wait *w = (struct pidfd_wait *)p;
    if (w->l->handle && !farce_loop_inert(w->l)) farce_core_forget_fd_quietly(w->l->core, w->l->handle, w->pidfd);
    close(w->pidfd);
    return Qnil;
}

VALUE farce_loop_process_wait(farce_loop *l, VALUE pid_v, VALUE flags_v)
{
    int pid = NUM2INT(pid_v), flags = NUM2INT(flags_v);
    if (flags & WNOHANG) return status_wait(pid_v, flags);
    long pidfd = -1;
#ifdef SYS_pidfd_open
    if (pid > 0) pidfd = syscall(SYS_pidfd_open, (pid_t)pid, 0);
#endif
    if (pidfd < 0) return Qundef; /* ESRCH included: waitpid in the thread raises ECHILD */
    fcntl((int)pidfd, F_SETFD, FD_CLOEXEC);
    /* a stale entry for this number belongs to a closed IO: drop it in Go */
    if (pidfd < l->fds.nfds && l->fds.fds[pidfd].io) farce_fd_table_forget(&l->fds, l->handle, (int)pidfd);
    struct pidfd_wait w = {l, pid_v, flags_v, (int)pidfd};
    return rb_ensure(pidfd_wait_body, (VALUE)&w, pidfd_wait_ensure, (VALUE)&w);
}
