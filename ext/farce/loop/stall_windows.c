/*
 * Stall detection on Windows (stall.h): there is no signal to interrupt one
 * thread with, so no sample of the stalled fiber can be taken there:
 * turning detection on says so.
 */
#include <ruby.h>
#include "loop/stall.h"
#include <windows.h> /* after ruby.h, which brings winsock2.h first */

int farce_stall_signal(void) { return 0; /* none */ }

int64_t farce_stall_thread_id(void) { return (int64_t)GetCurrentThreadId(); }

int farce_stall_install_handler(void (*job)(void *))
{
    rb_raise(rb_eNotImpError, "farce's stall detection (stall_threshold) is not available on Windows: it interrupts "
             "the stalled thread with a POSIX signal, and Windows has none");
    return -1;
}
