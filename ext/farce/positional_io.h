/*
 * Positional file I/O on worker threads for Farce::Scheduler's io_pread and
 * io_pwrite hooks (Ruby 3.3+); see positional_io.c.
 */
#ifndef FARCE_POSITIONAL_IO_H
#define FARCE_POSITIONAL_IO_H 1

#include <ruby.h>

/* Defines Farce::Scheduler#io_pread/#io_pwrite and Farce.__pread/__pwrite. */
void farce_offload_init(VALUE mFarce, VALUE cScheduler);

#endif
