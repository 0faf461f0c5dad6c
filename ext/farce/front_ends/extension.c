/*
 * The entry point of farce's Ruby extension (farce_ext.so): defines the
 * Farce module, its error class and both front ends over the Go core. Loading
 * it does not load Go (docs/cgo-hazards.md rule 6): the core is opened at the first
 * scheduler or selector that needs it (core_loader.c).
 */
#include <ruby.h>
#include "core_access/core_info.h"
#include "core_access/core_loader.h"
#include "front_ends/fiber_scheduler.h"
#include "front_ends/io_event_selector.h"
#include "hook_io/io_transfer.h"
#include "loop/event_loop.h"
#include "loop/fd_table.h"
#include "loop/inflight_ops.h"
#include "loop/stall.h"

VALUE farce_eError;

static VALUE farce_core_loaded_p(VALUE mod) { return farce_core_loaded() ? Qtrue : Qfalse; }

/* call-seq: Farce.backends -> [:auto, :epoll, :io_uring, :poll] (what this
 * system's core offers). Loads the core, so the Go runtime starts: in a
 * process that forks workers, ask in the workers. */
static VALUE farce_backends_m(VALUE mod) { return farce_backend_names(); }

void Init_farce_ext(void)
{
    /* Every method defined below may be called from any Ractor, and those
     * run in parallel (docs/architecture.md, "Ractors"). What makes that
     * safe: a loop and everything it owns belong to one thread; what the
     * process shares is set once here, or is a cache of one word per entry
     * (caller_may_wait.c, the steps' flags), or is guarded by a lock taken
     * only off the hooks' paths (the core's loading, the keeper's lists of
     * inflight_ops.c, stall.c's watched loops). Must come before the first
     * method is defined: Ruby marks each method by the flag at definition. */
    rb_ext_ractor_safe(true);
    farce_core_loader_init();
    farce_inflight_ops_init_once();
    farce_stall_init_once();
    farce_core_info_init();
    VALUE mFarce = rb_define_module("Farce");
    farce_eError = rb_define_class_under(mFarce, "Error", rb_eStandardError);
    rb_define_singleton_method(mFarce, "core_loaded?", farce_core_loaded_p, 0);
    rb_define_singleton_method(mFarce, "backends", farce_backends_m, 0);
    farce_io_transfer_init(mFarce);
    farce_fd_table_init(mFarce);
    farce_single_transfer_check();
    farce_fiber_scheduler_init(mFarce);
    farce_io_event_selector_init(mFarce);
}
