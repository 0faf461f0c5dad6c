/*
 * Loading the Go core. The rules here come from DESIGN.md, each one a
 * hang or a crash when broken:
 *  - `require "farce"` must not start the Go runtime: it is dlopen'ed on the
 *    first Farce::Scheduler.new, and never unloaded.
 *  - It is loaded with asynchronous signals blocked in the loading thread,
 *    so Go's threads inherit that mask and process signals reach Ruby's.
 *  - After Go is up, sa_mask is cleared on Go's SIGSEGV/SIGBUS handlers,
 *    otherwise a thread that longjmps out of a guard-page fault keeps every
 *    signal blocked.
 *  - A child forked after the runtime started must never call Go.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include "core_loader.h"

struct farce_core_api farce_core;
volatile uint64_t farce_fork_generation;

static void *core_handle;
static int core_inherited; /* the runtime was started by a parent process */
static int64_t core_abi;     /* what the loaded core answered; 1 is ours */

static void atfork_child(void)
{
    farce_fork_generation++;
    if (core_handle) core_inherited = 1;
}

void farce_core_loader_init(void)
{
    pthread_atfork(NULL, NULL, atfork_child);
}

int farce_core_loaded(void) { return core_handle != NULL && !core_inherited; }

/* The core sits next to this extension unless FARCE_CORE_LIBRARY says otherwise. */
static void core_path(char *buf, size_t len)
{
    const char *env = getenv("FARCE_CORE_LIBRARY");
    if (env && *env) {
        snprintf(buf, len, "%s", env);
        return;
    }
    Dl_info info;
    if (dladdr((void *)farce_core_load, &info) && info.dli_fname) {
        const char *slash = strrchr(info.dli_fname, '/');
        int dirlen = slash ? (int)(slash - info.dli_fname) : 1;
        snprintf(buf, len, "%.*s/libfarce_core.so", dirlen, slash ? info.dli_fname : ".");
        return;
    }
    snprintf(buf, len, "libfarce_core.so");
}

static void clear_handler_mask(int sig)
{
    struct sigaction sa;
    if (sigaction(sig, NULL, &sa) == 0) {
        sigemptyset(&sa.sa_mask);
        sigaction(sig, &sa, NULL);
    }
}

#define RESOLVE(field, symbol)                                               \
    do {                                                                     \
        *(void **)&farce_core.field = dlsym(handle, symbol);                 \
        if (!farce_core.field) missing = symbol;                             \
    } while (0)

void farce_core_check_usable(void)
{
    if (core_inherited) {
        rb_raise(farce_eError,
                 "farce's Go runtime was started in the parent process before fork; "
                 "a forked child cannot use it. Create Farce::Scheduler objects (and run "
                 "IO_EVENT_SELECTOR=Farce reactors that wait on anything) only after fork: "
                 "require farce in the master, create schedulers in each worker");
    }
}

void farce_core_load(void)
{
    farce_core_check_usable();
    if (core_handle && core_abi == 1) return;

    char path[PATH_MAX];
    core_path(path, sizeof(path));
    if (core_handle) {
        rb_raise(farce_eError, "farce's Go core at %s speaks ABI %lld, this extension 1: rebuild with `rake compile`",
                 path, (long long)core_abi);
    }

    sigset_t async_signals, saved;
    sigfillset(&async_signals);
    sigdelset(&async_signals, SIGSEGV);
    sigdelset(&async_signals, SIGBUS);
    sigdelset(&async_signals, SIGFPE);
    sigdelset(&async_signals, SIGILL);
    sigdelset(&async_signals, SIGTRAP);
    sigdelset(&async_signals, SIGSYS);
    pthread_sigmask(SIG_BLOCK, &async_signals, &saved);

    void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        pthread_sigmask(SIG_SETMASK, &saved, NULL);
        rb_raise(farce_eError, "cannot load farce's Go core from %s: %s "
                 "(build it with `rake compile`, or set FARCE_CORE_LIBRARY)", path, dlerror());
    }
    const char *missing = NULL;
    RESOLVE(abi, "farce_core_abi");
    RESOLVE(new_, "farce_new");
    RESOLVE(close, "farce_close");
    RESOLVE(last_error, "farce_last_error");
    RESOLVE(wait_fd, "farce_wait_fd");
    RESOLVE(park, "farce_park");
    RESOLVE(yield, "farce_yield");
    RESOLVE(wake, "farce_wake");
    RESOLVE(cancel, "farce_cancel");
    RESOLVE(forget_fd, "farce_forget_fd");
    RESOLVE(poll, "farce_poll");
    RESOLVE(stats, "farce_stats");
    *(void **)&farce_core.backends = dlsym(handle, "farce_backends");
    *(void **)&farce_core.probe = dlsym(handle, "farce_probe");
    *(void **)&farce_core.ops_supported = dlsym(handle, "farce_ops_supported");
    *(void **)&farce_core.submit_op = dlsym(handle, "farce_submit_op");
    *(void **)&farce_core.cancel_op = dlsym(handle, "farce_cancel_op");
    if (!farce_core.ops_supported || !farce_core.submit_op || !farce_core.cancel_op) {
        farce_core.ops_supported = NULL;
        farce_core.submit_op = NULL;
        farce_core.cancel_op = NULL;
    }
    if (missing) {
        pthread_sigmask(SIG_SETMASK, &saved, NULL);
        /* never dlclose a Go library: the runtime cannot be unloaded */
        rb_raise(farce_eError, "farce's Go core at %s lacks %s: rebuild with `rake compile`", path, missing);
    }
    /* The first call waits until the runtime finished starting its threads,
     * all of them with the mask blocked above. */
    core_abi = farce_core.abi();
    pthread_sigmask(SIG_SETMASK, &saved, NULL);
    clear_handler_mask(SIGSEGV);
    clear_handler_mask(SIGBUS);
    core_handle = handle;
    if (core_abi != 1) {
        rb_raise(farce_eError, "farce's Go core at %s speaks ABI %lld, this extension 1: rebuild with `rake compile`",
                 path, (long long)core_abi);
    }
}
