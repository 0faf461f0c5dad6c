/*
 * Windows only (extconf.rb adds it there): the IOCP driver polls sockets
 * only (AFD), so a pipe, file or console can never be waited on. A write
 * of a file or console, or a read of one, runs on the scheduler's worker
 * pool instead, where it blocks a worker thread and not the loop. A pipe
 * needs no worker, with either front end: a read polls the pipe from its
 * fiber until it holds bytes (farce_win32_wait_stream), then reads the
 * bytes that are there, which does not wait; read_nonblock of an empty
 * pipe is answered at once (PeekNamedPipe). A write puts the pipe in its
 * no-wait mode for the call, so that it writes what fits or nothing, and
 * polls from its fiber while nothing fits (farce_win32_pipe_write_nowait).
 */
#ifdef _WIN32
#include "hook_io/stream_offload_windows.h"
#include <windows.h> /* after ruby.h, which brings winsock2.h first */
#include <errno.h>

int farce_win32_read_would_block(int fd)
{
    HANDLE h = (HANDLE)rb_w32_get_osfhandle(fd);
    if (h == INVALID_HANDLE_VALUE || GetFileType(h) != FILE_TYPE_PIPE) return 0;
    DWORD avail = 0;
    /* a broken pipe fails here: not blocking, the read finds end of file */
    return PeekNamedPipe(h, NULL, 0, NULL, &avail, NULL) && avail == 0;
}

int farce_win32_stream_ready(int fd, int events)
{
    int got = events & RUBY_IO_WRITABLE;
    if ((events & RUBY_IO_READABLE) && !farce_win32_read_would_block(fd)) got |= RUBY_IO_READABLE;
    return got;
}

size_t farce_win32_pipe_room(int fd, size_t room)
{
    HANDLE h = (HANDLE)rb_w32_get_osfhandle(fd);
    if (h == INVALID_HANDLE_VALUE || GetFileType(h) != FILE_TYPE_PIPE) return 0;
    DWORD avail = 0;
    if (!PeekNamedPipe(h, NULL, 0, NULL, &avail, NULL) || avail == 0) return room; /* broken: end of file */
    return avail < room ? avail : room;
}

ssize_t farce_win32_pipe_write_nowait(int fd, const void *at, size_t room)
{
    HANDLE h = (HANDLE)rb_w32_get_osfhandle(fd);
    if (h == INVALID_HANDLE_VALUE || GetFileType(h) != FILE_TYPE_PIPE) return -ENOTSUP;
    /* Nothing tells the write end how much room the pipe has: the quota
     * NtQueryInformationFile reports is always 0 under wine, and on Windows
     * a reader waiting in ReadFile takes from it too. So the write asks the
     * pipe itself: in no-wait mode a write that does not fit returns
     * without waiting, and Ruby's write (rb_w32_write) then halves its
     * length until a part fits (wine writes all of a part or none of it,
     * Windows what fits), or says EWOULDBLOCK when not one byte does. */
    DWORD state;
    if (!GetNamedPipeHandleState(h, &state, NULL, NULL, NULL, NULL, 0)) return -ENOTSUP;
    int switched = !(state & PIPE_NOWAIT);
    if (switched) {
        DWORD nowait = state | PIPE_NOWAIT;
        if (!SetNamedPipeHandleState(h, &nowait, NULL, NULL)) return -ENOTSUP; /* no right to: the worker writes */
    }
    /* No more than the pipe's buffer at once: under wine a part that is
     * larger never fits, and each try that fails is a call to its server. */
    DWORD in_size = 0, out_size = 0;
    if (GetNamedPipeInfo(h, NULL, &out_size, &in_size, NULL)) {
        DWORD most = in_size > out_size ? in_size : out_size;
        if (most > 0 && room > most) room = most;
    }
    ssize_t n = write(fd, at, room);
    int e = errno;
    /* back as it was: a blocking write Ruby makes itself (a thread with no
     * scheduler) must still wait */
    if (switched) SetNamedPipeHandleState(h, &state, NULL, NULL);
    if (n > 0) return n;
    if (n == 0 || e == EWOULDBLOCK || e == EAGAIN) return -EAGAIN;
    return -e;
}

int64_t farce_win32_wait_stream(farce_loop *l, VALUE io, int fd, int events, int64_t timeout_ns)
{
    int64_t deadline = timeout_ns >= 0 ? farce_monotonic_ns() + timeout_ns : -1;
    int64_t step = FARCE_WIN32_FIRST_POLL_NS;
    for (;;) {
        if (farce_io_fd_or_closed(io) != fd) rb_raise(rb_eIOError, "closed stream");
        int got = farce_win32_stream_ready(fd, events);
        if (got) return got;
        int64_t now = farce_monotonic_ns();
        if (deadline >= 0 && now >= deadline) return 0;
        int64_t left = deadline >= 0 ? deadline - now : step;
        if (farce_loop_park_polled(l, fd, left < step ? left : step) == FARCE_RESUMED_ELSEWHERE)
            return FARCE_RESUMED_ELSEWHERE;
        step = farce_win32_next_poll_ns(step);
    }
}

VALUE farce_win32_offload_stream(farce_loop *l, VALUE io, VALUE buffer, VALUE length, size_t offset, int writing,
                                 VALUE moved)
{
    ID id_offload = rb_intern("__offload_stream"); /* rb_intern's own cache (a constant name) */
    if (!rb_obj_respond_to(l->owner, id_offload, 1)) return Qundef;
    VALUE args[6] = {writing ? Qtrue : Qfalse, io, buffer, length, SIZET2NUM(offset), moved};
    return rb_funcallv(l->owner, id_offload, 6, args);
}
#endif
