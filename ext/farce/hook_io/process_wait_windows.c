/*
 * Process.wait on Windows: no pidfd, so the front end has a thread do the
 * wait (process_wait_unix.c says how the loop waits elsewhere).
 */
#include "loop/event_loop.h"

VALUE farce_loop_process_wait(farce_loop *l, VALUE pid_v, VALUE flags_v) { return Qundef; }
