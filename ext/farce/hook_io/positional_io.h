/*
 * Positional file I/O on worker threads for Farce::Scheduler's io_pread and
 * io_pwrite hooks (Ruby 3.3+); see positional_io.c.
 */
#ifndef FARCE_POSITIONAL_IO_H
#define FARCE_POSITIONAL_IO_H 1

#include <ruby.h>
#include "loop/event_loop.h"

/* Defines Farce::Scheduler#io_pread/#io_pwrite, Farce.__pread/__pwrite and
 * the file helpers (__file_transfer_once, __file_nowait). ops_loop(scheduler)
 * is the scheduler's loop when its file transfers are completion operations
 * (io_uring), else NULL: then io_pread/io_pwrite go to the worker pool. */
void farce_offload_init(VALUE mFarce, VALUE cScheduler, farce_loop *(*ops_loop)(VALUE scheduler));

#endif
