/*
 * Windows: reads and writes of descriptors that are not sockets (pipes,
 * files, consoles), which nothing there can wait on; see
 * stream_offload_windows.c. For io_transfer.c, io_transfer_v4.c and both
 * front ends' io_wait.
 */
#ifndef FARCE_STREAM_OFFLOAD_WINDOWS_H
#define FARCE_STREAM_OFFLOAD_WINDOWS_H 1
#ifdef _WIN32

#include <ruby.h>
#include "loop/event_loop.h"
#include "loop/wait_table.h"

/* Whether a read of fd (not a socket) would block now: a pipe with nothing
 * in it. Anything else is never known to block (a file), or cannot be
 * asked (a console): 0. */
int farce_win32_read_would_block(int fd);

/* The events of `events` a descriptor that is not a socket is ready for now:
 * a pipe is readable when it holds bytes or is broken (the read then finds
 * end of file), anything else always; every one is writable (nothing tells
 * how much room a pipe has without writing to it: a pipe write that finds
 * none polls by itself, and a file or console write runs on the worker
 * pool); never PRIORITY. */
int farce_win32_stream_ready(int fd, int events);

/* How much of room a read of fd can take without waiting when fd is a
 * pipe: at most the bytes it holds, or room when it is broken (the read
 * finds end of file). 0 when fd is not a pipe. */
size_t farce_win32_pipe_room(int fd, size_t room);

/* One write of fd that never waits, when fd is a pipe: the bytes of room
 * that fit in the pipe now (at least 1), -EAGAIN when none fit, -errno when
 * the write fails (-EPIPE: no reader), or -ENOTSUP when fd is not a pipe or
 * its wait mode cannot be changed (the caller then writes as before). */
ssize_t farce_win32_pipe_write_nowait(int fd, const void *at, size_t room);

/* A pipe is polled in steps that start at 1 ms and double up to 16 ms:
 * short enough that a pipe answered at once is seen at once, long enough
 * that a pipe that stays empty costs a few wakeups a second (Ruby's own
 * select polls pipes on Windows the same way). */
#define FARCE_WIN32_FIRST_POLL_NS 1000000LL
static inline int64_t farce_win32_next_poll_ns(int64_t step)
{
    return step < 10000000LL ? step * 2 : step;
}

/* A wait for events on a descriptor that is not a socket, for both front
 * ends' io_wait and for reads that must wait: no kernel wait exists for it,
 * so the fiber parks in the poll steps above until farce_win32_stream_ready
 * says yes or timeout_ns (< 0: none) passes. Each step is a timer of the
 * loop (farce_loop_park_polled), so other fibers run meanwhile and an
 * exception or io_close reaches the waiting fiber at once. Returns the
 * ready events, 0 on timeout, or FARCE_RESUMED_ELSEWHERE when someone else
 * switched to the fiber; IOError when io is closed meanwhile. */
int64_t farce_win32_wait_stream(farce_loop *l, VALUE io, int fd, int events, int64_t timeout_ns);

/* One read or write of fd through the scheduler's worker pool
 * (Farce::Scheduler#__offload_stream), for a file or console (or a pipe
 * whose wait mode cannot be changed): the byte count or -errno, as the
 * io_read/io_write hooks return it. Qundef when the front end has no pool
 * (the io-event selector): the caller then makes the call itself. moved (a
 * one-element array) gets the count as soon as the worker has it, so that a
 * caller an exception reached while it waited can give a read's bytes back. */
VALUE farce_win32_offload_stream(farce_loop *l, VALUE io, VALUE buffer, VALUE length, size_t offset, int writing,
                                 VALUE moved);

#endif
#endif
