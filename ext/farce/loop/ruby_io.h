/*
 * An IO's descriptor, read from rb_io_t without the deprecation warnings of
 * its fd field (Ruby 3.3+), for the descriptor table and the hooks; and an
 * IO::Buffer's bytes for one transfer.
 */
#ifndef FARCE_RUBY_IO_H
#define FARCE_RUBY_IO_H 1

#include <ruby.h>
#include <ruby/io.h>
#include <ruby/io/buffer.h>

/* The descriptor of an IO, or -1 once it is closed, without raising (the
 * close scan runs in the loop, where raising would abandon other fibers). */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static inline int farce_io_fd_or_closed(VALUE io)
{
    rb_io_t *fptr = RFILE(io)->fptr;
    return fptr ? fptr->fd : -1;
}

/* The IO's descriptor; raises IOError when it is closed. */
static inline int farce_io_descriptor(VALUE io)
{
    rb_io_t *fptr;
    GetOpenFile(io, fptr);
    rb_io_check_closed(fptr);
    return fptr->fd;
}
#pragma GCC diagnostic pop

/* The bytes of buffer a transfer uses: written into for a read, read from
 * for a write (only ever written out, never modified). Raises as IO::Buffer
 * does (a freed or read-only buffer, a lock held by another user). */
static inline void farce_buffer_bytes(VALUE buffer, int reading, void **base, size_t *size)
{
    if (reading) {
        rb_io_buffer_get_bytes_for_writing(buffer, base, size);
    } else {
        const void *readable;
        rb_io_buffer_get_bytes_for_reading(buffer, &readable, size);
        *base = (void *)(uintptr_t)readable;
    }
}

#endif
