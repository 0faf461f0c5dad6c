/*
 * The signal masks around the Go runtime's start (docs/cgo-hazards.md, 5 and 6):
 *  - a copy of the core is loaded with asynchronous signals blocked in the
 *    loading thread, so Go's threads inherit that mask and process signals
 *    reach Ruby's;
 *  - after Go is up, sa_mask is cleared on Go's SIGSEGV/SIGBUS handlers,
 *    otherwise a thread that longjmps out of a guard-page fault keeps every
 *    signal blocked.
 * core_open.c calls these around its dlopen and the runtime's start.
 */
#include <pthread.h>
#include <signal.h>
#include "core_access/core_signals.h"

void farce_core_signals_block(sigset_t *saved)
{
    sigset_t async_signals;
    sigfillset(&async_signals);
    sigdelset(&async_signals, SIGSEGV);
    sigdelset(&async_signals, SIGBUS);
    sigdelset(&async_signals, SIGFPE);
    sigdelset(&async_signals, SIGILL);
    sigdelset(&async_signals, SIGTRAP);
    sigdelset(&async_signals, SIGSYS);
    pthread_sigmask(SIG_BLOCK, &async_signals, saved);
}

void farce_core_signals_restore(const sigset_t *saved)
{
    pthread_sigmask(SIG_SETMASK, saved, NULL);
}

static void clear_handler_mask(int sig)
{
    struct sigaction sa;
    if (sigaction(sig, NULL, &sa) == 0) {
        sigemptyset(&sa.sa_mask);
        sigaction(sig, &sa, NULL);
    }
}

void farce_core_signals_after_start(void)
{
    clear_handler_mask(SIGSEGV);
    clear_handler_mask(SIGBUS);
}
