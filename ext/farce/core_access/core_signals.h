/*
 * The signal masks around the Go runtime's start; see core_signals.c.
 */
#ifndef FARCE_CORE_SIGNALS_H
#define FARCE_CORE_SIGNALS_H 1

#include <signal.h>

/* Blocks the asynchronous signals in the calling thread before a copy of the
 * core is dlopen'ed (its runtime's threads inherit the mask); *saved gets the
 * mask to restore. */
void farce_core_signals_block(sigset_t *saved);
/* Restores the mask farce_core_signals_block saved. */
void farce_core_signals_restore(const sigset_t *saved);
/* After a runtime started: clears sa_mask on Go's SIGSEGV/SIGBUS handlers. */
void farce_core_signals_after_start(void);

#endif
