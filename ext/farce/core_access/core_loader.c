/*
 * Finding and loading the Go core, once per fork generation: which file
 * (next to this extension, or FARCE_CORE_LIBRARY), whether this process
 * opens the library itself or needs a private copy (core_copy.c), the fork
 * bookkeeping, and the failure a later selector repeats. The rules here come
 * from docs/cgo-hazards.md, each one a hang or a crash when broken:
 *  - `require "farce"` must not start the Go runtime: it is dlopen'ed on the
 *    first Farce::Scheduler.new (or selector wait), and never unloaded.
 *  - It is loaded with asynchronous signals blocked in the loading thread,
 *    and sa_mask is cleared on Go's fault handlers after (core_signals.c,
 *    around core_open.c's dlopen).
 *  - A child forked after a runtime started never calls that runtime again:
 *    it loads a fresh copy of the library instead (core_copy.c).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "core_access/core_loader.h"
#include "core_access/core_copy.h"
#include "core_access/core_open.h"

volatile uint64_t farce_fork_generation;

static struct core_copy *current; /* the copy this process calls; NULL before the first load */

/* The last failed attempt to load in this generation, repeated by
 * farce_core_check_usable so that a selector fails at creation. */
static char *failure;
static uint64_t failure_generation;

static void atfork_child(void)
{
    farce_fork_generation++;
    current = NULL;
}

/* The prepare handler: a process whose runtime started makes the copy its
 * children share (core_copy.c). */
static void atfork_prepare(void)
{
    if (current) farce_copy_prepare_for_children(current->source, farce_fork_generation + 1);
}

void farce_core_loader_init(void)
{
    pthread_atfork(atfork_prepare, NULL, atfork_child);
}

int farce_core_loaded(void) { return current != NULL; }

uint64_t farce_core_generation(void) { return current ? current->generation : UINT64_MAX; }

const struct core_copy *farce_core_current(void) { return current; }

const char *farce_core_last_failure(void)
{
    return failure && failure_generation == farce_fork_generation ? failure : NULL;
}

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

/* ---- farce_core_load ------------------------------------------------------- */

static double seconds_since(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

NORETURN(static void raise_failure(const char *message));
static void raise_failure(const char *message)
{
    free(failure);
    failure = strdup(message);
    failure_generation = farce_fork_generation;
    rb_raise(farce_eError, "%s", message);
}

void farce_core_check_usable(void)
{
    if (!current && failure && failure_generation == farce_fork_generation) rb_raise(farce_eError, "%s", failure);
}

const farce_core_copy *farce_core_load(void)
{
    if (current) return current->calls;

    struct core_copy *c = calloc(1, sizeof(*c)); /* never freed: the library it names is never unloaded */
    if (!c) rb_raise(rb_eNoMemError, "farce: cannot allocate the core's table");
    core_path(c->source, sizeof(c->source));
    c->generation = farce_fork_generation;
    c->pid = getpid();
    clock_gettime(CLOCK_REALTIME, &c->loaded_at);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);

    struct reasons why = {"", 0};
    char broken[PATH_MAX + 256] = "";
    enum open_result r;
    if (farce_runtimes_mapped() == 0) {
        /* No runtime here yet: the library itself, as a plain dlopen. */
        c->kind = "file";
        snprintf(c->mapped, sizeof(c->mapped), "%s", c->source);
        r = farce_open_core(c, c->source, &why, broken, sizeof(broken));
        if (r == OPEN_REFUSED) {
            char message[sizeof(why.text) + 256];
            snprintf(message, sizeof(message), "cannot load farce's Go core from %s: %s "
                     "(build it with `rake compile`, or set FARCE_CORE_LIBRARY)", c->source, why.text);
            free(c);
            raise_failure(message);
        }
    } else {
        /* A child of a process whose runtime started: a fresh copy. The
         * FARCE_CORE_COPY knob picks the places: auto (memfd, then
         * directories), memfd, or tmpfile (directories only). */
        const char *mode = getenv("FARCE_CORE_COPY");
        if (!mode || !*mode) mode = "auto";
        int memfd = strcmp(mode, "tmpfile") != 0, dirs = strcmp(mode, "memfd") != 0;
        if (strcmp(mode, "auto") && strcmp(mode, "memfd") && strcmp(mode, "tmpfile")) {
            free(c);
            rb_raise(farce_eError, "FARCE_CORE_COPY=%s: expected auto, memfd or tmpfile", mode);
        }
        r = OPEN_REFUSED;
        if (memfd) r = farce_copy_try_memfd(c, &why, broken, sizeof(broken));
        if (r == OPEN_REFUSED && dirs) r = farce_copy_try_directories(c, &why, broken, sizeof(broken));
        if (r == OPEN_REFUSED) {
            char message[sizeof(why.text) + 1024];
            snprintf(message, sizeof(message),
                     "farce cannot start its Go core in this forked child (pid %d, fork generation %llu): "
                     "the parent had started its own, which a child can never use, and loading a fresh copy of "
                     "%s was refused everywhere it was tried (FARCE_CORE_COPY=%s). Tried: %s. To fix: allow "
                     "executable memfds (sysctl vm.memfd_noexec=0, or a seccomp policy that permits "
                     "memfd_create), or set FARCE_CORE_COPY_DIRS to a directory this process can write on a "
                     "filesystem mounted with exec; or create farce schedulers only after fork "
                     "(require farce in the master, run reactors in the workers)",
                     (int)getpid(), (unsigned long long)farce_fork_generation, c->source, mode, why.text);
            free(c);
            raise_failure(message);
        }
    }
    if (r == OPEN_BROKEN) {
        /* A library we cannot use; if its runtime started it stays mapped. */
        free(c);
        raise_failure(broken);
    }
    c->load_seconds = seconds_since(&t0);
    current = c;
    return c->calls;
}
