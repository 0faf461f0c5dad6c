/*
 * Whether the Ruby method that called a read or write hook never waits
 * (IO#read_nonblock, IO#write_nonblock); see caller_may_wait.c.
 */
#ifndef FARCE_CALLER_MAY_WAIT_H
#define FARCE_CALLER_MAY_WAIT_H 1

#include <ruby.h>

/* 1 when the method that called the current hook (a C method's frame) has
 * a name that ends in _nonblock, or when Ruby code sits between them and
 * one of the few frames above the hook does: that caller must get -EAGAIN,
 * never a wait. A false yes only costs a blocking read the slower way
 * (-EAGAIN, Ruby's io_wait, the hook again). */
int farce_caller_is_nonblock(void);

void farce_caller_may_wait_init(void);
/* Farce.__caller_is_nonblock? (tests only). */
void farce_caller_may_wait_define(VALUE mFarce);

#endif
