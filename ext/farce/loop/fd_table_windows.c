/*
 * The descriptor table's file facts on Windows; see fd_table.h.
 */
#include "loop/fd_table.h"
#include <windows.h> /* after ruby.h, which brings winsock2.h first */

/* A SOCKET value is not reused while its socket is open, so the number names
 * its file and no identity needs telling, nor checking after a reopen. */
int farce_fd_file_now(int fd, uint64_t *dev, uint64_t *ino)
{
    *dev = *ino = 0;
    return 0;
}

void farce_fd_file_recheck(farce_fd_table *t, int64_t handle, VALUE backend, farce_fd_ent *f, int fd)
{
    f->reopens = farce_fd_reopens;
}

/* Only a socket can be waited on (the IOCP driver polls sockets through
 * AFD). It is made non-blocking here, as Ruby on Linux makes every socket,
 * so that a recv or send never blocks the loop; Ruby's own calls on it then
 * wait for readiness when it is not ready. A pipe is polled, a file or a
 * console goes to the worker pool (hook_io's Windows steps). */
void farce_fd_file_take(farce_fd_table *t, int64_t handle, VALUE backend, farce_fd_ent *f, int fd, int shared)
{
    f->drained = 0;
    f->read_with_op = 0;
    f->reopens = farce_fd_reopens;
    f->socket = f->stream = f->pollable = rb_w32_is_socket(fd) != 0;
    f->blocking = !f->socket;
    if (f->socket) {
        rb_w32_set_nonblock(fd);
        f->kind = FARCE_FD_SOCKET;
        return;
    }
    DWORD type = GetFileType((HANDLE)rb_w32_get_osfhandle(fd));
    f->kind = type == FILE_TYPE_PIPE ? FARCE_FD_PIPE : type == FILE_TYPE_DISK ? FARCE_FD_FILE : FARCE_FD_TERMINAL;
}
