/*
 * The step of a transfer at a file position (io_pread/io_pwrite of the
 * selector) on a descriptor that is not a regular file on Linux (whose own
 * step takes positions too: step_file_unix.c): one pread or pwrite, which a
 * file position makes a question for files only (a stream answers ESPIPE).
 */
#include <ruby.h>
#include "platforms/sys_io.h"
#include "hook_io/transfer_step.h"

int64_t farce_step_positional(farce_transfer *t)
{
    off_t pos = t->from + (off_t)t->total;
    t->l->transfer_calls++; /* stats: system calls per request */
    ssize_t n = t->reading ? pread(t->fd, t->at, t->room, pos) : pwrite(t->fd, t->at, t->room, pos);
    return n < 0 ? -errno : n;
}
