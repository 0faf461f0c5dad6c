/*
 * Farce::Scheduler (fiber_scheduler.c): Ruby's Fiber::Scheduler over the
 * loop. lib/farce/scheduler.rb adds the rarely called hooks.
 */
#ifndef FARCE_FIBER_SCHEDULER_H
#define FARCE_FIBER_SCHEDULER_H 1

#include <ruby.h>

void farce_fiber_scheduler_init(VALUE mFarce);

#endif
