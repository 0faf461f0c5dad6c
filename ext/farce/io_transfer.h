/*
 * The read/write loop behind io_read, io_write (both front ends) and
 * io_pread, io_pwrite (the selector); see io_transfer.c.
 */
#ifndef FARCE_IO_TRANSFER_H
#define FARCE_IO_TRANSFER_H 1

#include <sys/types.h>
#include <ruby/fiber/scheduler.h>
#include "event_loop.h"

/* Ruby 4.1's hooks (scheduler interface version 4, ruby/ruby#18483):
 * io_read/io_write(io, buffer, offset, length) and io_pread/io_pwrite(io,
 * buffer, from, offset, length), each one transfer of at most `length`
 * bytes that never waits (-EAGAIN instead). Known from the headers farce is
 * built against, as every hook signature is (io_transfer_v4.c). */
#if defined(RUBY_FIBER_SCHEDULER_VERSION) && RUBY_FIBER_SCHEDULER_VERSION >= 4
#define FARCE_SINGLE_TRANSFER_HOOKS 1
#else
#define FARCE_SINGLE_TRANSFER_HOOKS 0
#endif

enum farce_direction { FARCE_READ, FARCE_WRITE };

/* Moves at least `length` bytes between buffer[offset...] and io (one
 * successful call when length is 0), at file position `from`, or at the
 * stream's position when from < 0. Returns the count, or -errno when
 * nothing moved; a read stops early at end of file. A length or offset
 * that does not fit the buffer gets -EINVAL, as from io-event's selectors. */
VALUE farce_io_transfer(farce_loop *l, VALUE io, VALUE buffer, VALUE length, size_t offset, off_t from,
                        enum farce_direction direction);

void farce_io_transfer_init(void);

/* The version 4 transfer (io_transfer_v4.c): one read or write of at most
 * `length` bytes between buffer[offset, length] and io, at file position
 * `from` (or the stream's when from < 0), that never waits. Returns the
 * count (0 at end of file, and for a length of 0 without any call), or
 * -errno: -EAGAIN when the descriptor is not ready, -EINVAL for a range
 * outside the buffer. The buffer is held around the system call only. */
VALUE farce_io_transfer_once(farce_loop *l, VALUE io, VALUE buffer, VALUE offset, VALUE length, off_t from,
                             enum farce_direction direction);

/* io_transfer.c's stream read/write that never blocks the thread (for
 * io_transfer_v4.c): what read(2)/write(2) return, EAGAIN included. */
ssize_t farce_stream_nowait(farce_fd_ent *f, int fd, int reading, void *at, size_t room);

#endif
