/*
 * The read/write loop behind io_read, io_write (both front ends) and
 * io_pread, io_pwrite (the selector); see io_transfer.c.
 */
#ifndef FARCE_IO_TRANSFER_H
#define FARCE_IO_TRANSFER_H 1

#include <sys/types.h>
#include "loop_core.h"

enum farce_direction { FARCE_READ, FARCE_WRITE };

/* Moves at least `length` bytes between buffer[offset...] and io (one
 * successful call when length is 0), at file position `from`, or at the
 * stream's position when from < 0. Returns the count, or -errno when
 * nothing moved; a read stops early at end of file. A length or offset
 * that does not fit the buffer gets -EINVAL, as from io-event's selectors. */
VALUE farce_io_transfer(farce_loop *l, VALUE io, VALUE buffer, VALUE length, size_t offset, off_t from,
                        enum farce_direction direction);

void farce_io_transfer_init(void);

#endif
