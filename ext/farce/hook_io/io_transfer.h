/*
 * The read/write loop behind io_read, io_write (both front ends) and
 * io_pread, io_pwrite (the selector); see io_transfer.c.
 */
#ifndef FARCE_IO_TRANSFER_H
#define FARCE_IO_TRANSFER_H 1

#include <sys/types.h>
#include <ruby/fiber/scheduler.h>
#include "loop/event_loop.h"
#include "hook_io/transfer_step.h" /* enum farce_direction */

/* Ruby 4.1's hooks (scheduler interface version 4, ruby/ruby#18483):
 * io_read/io_write(io, buffer, offset, length) and io_pread/io_pwrite(io,
 * buffer, from, offset, length), each one transfer of at most `length`
 * bytes that waits for no readiness (-EAGAIN instead; on io_uring one
 * completion operation). Known from the headers farce is
 * built against, as every hook signature is (io_transfer_v4.c). */
#if defined(RUBY_FIBER_SCHEDULER_VERSION) && RUBY_FIBER_SCHEDULER_VERSION >= 4
#define FARCE_SINGLE_TRANSFER_HOOKS 1
#else
#define FARCE_SINGLE_TRANSFER_HOOKS 0
#endif

/* Moves at least `length` bytes between buffer[offset...] and io (one
 * successful call when length is 0), at file position `from`, or at the
 * stream's position when from < 0. Returns the count, or -errno when
 * nothing moved; a read stops early at end of file. A length or offset
 * that does not fit the buffer gets -EINVAL, as from io-event's selectors. */
VALUE farce_io_transfer(farce_loop *l, VALUE io, VALUE buffer, VALUE length, size_t offset, off_t from,
                        enum farce_direction direction);

/* Also defines Farce.__caller_is_nonblock? (caller_may_wait.c). */
void farce_io_transfer_init(VALUE mFarce);

/* The version 4 transfer (io_transfer_v4.c): one read or write of at most
 * `length` bytes between buffer[offset, length] and io, at file position
 * `from` (or the stream's when from < 0), that waits for no readiness. Returns the
 * count (0 at end of file, and for a length of 0 without any call), or
 * -errno: -EAGAIN when the descriptor is not ready and the transfer cannot
 * be a completion operation, -EINVAL for a range outside the buffer. With
 * completion operations (io_uring) a fiber that can park waits for the one
 * operation instead of getting -EAGAIN (io_transfer_v4.c). */
VALUE farce_io_transfer_once(farce_loop *l, VALUE io, VALUE buffer, VALUE offset, VALUE length, off_t from,
                             enum farce_direction direction);

/* One read or write of a regular file at pos (-1: its position) on this
 * thread only when it cannot wait for the disk: a read of at most copy_max
 * bytes whose bytes the page cache holds (cachestat), a write with
 * RWF_NOWAIT. Returns what preadv2/pwritev2 do; -1 with EAGAIN when it
 * would wait, or cannot say. */
ssize_t farce_file_nowait(int fd, int reading, void *at, size_t room, off_t pos, size_t copy_max);

/* For IO.select's probe: -1 when the core can ask fd's readiness, else the
 * events of `events` fd is ready for now (on Windows, anything but a
 * socket: steps_windows.c). */
int farce_ready_without_core(int fd, int events);

/* Raises LoadError when the running Ruby calls the read/write hooks in
 * the other form than the one this build binds (io_transfer_v4.c). */
void farce_single_transfer_check(void);

/* The call of a pollable descriptor's step (a socket's, a pipe's, a
 * terminal's: steps_unix.c, steps_windows.c) that never blocks the thread,
 * for io_transfer_v4.c: what read(2)/write(2) return, EAGAIN included. */
ssize_t farce_stream_nowait(farce_fd_ent *f, int fd, int reading, void *at, size_t room);

/* For io_transfer_v4.c, io_transfer.c's own rules: whether f's transfers
 * may be completion operations now (io_uring, a non-blocking stream, a
 * fiber that can park); whether the Ruby method that called the hook is a
 * *_nonblock one (it must get -EAGAIN, never a wait); and one completion
 * operation on len bytes at `at` inside buffer, held and pinned until the
 * kernel is done (the count or -errno; IOError when io was closed
 * meanwhile; an exception that reached the parked fiber is raised once the
 * completion is reaped, the bytes it read given back to io). */
int farce_io_use_ops(const farce_loop *l, const farce_fd_ent *f);
int farce_io_nonblocking_call(void);
int64_t farce_io_run_op(farce_loop *l, VALUE io, int fd, VALUE buffer, enum farce_direction direction, void *at,
                        size_t len);

#endif
