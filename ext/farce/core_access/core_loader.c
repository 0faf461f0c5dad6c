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
 *
 * Every Ractor's threads may ask for the core at once, so loading holds a
 * lock (load_lock), as do the fork handlers, and the copy this process calls
 * is published with a release store once it is complete: the question a
 * new loop asks first, whether a core is loaded, is one acquire load. No
 * Ruby call is made with the lock held (an exception is raised after it is
 * released), and none that could start a GC.
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

static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;

/* The copy this process calls; NULL before the first load. Written under
 * load_lock, read without it (published complete: see loaded_copy). */
static struct core_copy *current;

/* The last failed attempt to load in this generation, repeated by
 * farce_core_check_usable so that a selector fails at creation. Written
 * under load_lock. A message is never freed (Farce.core_info may be reading
 * it in another Ractor): a new one replaces it only when it says something
 * else, so a failure repeated by every attempt is kept once. */
static const char *failure;
static uint64_t failure_generation;

static struct core_copy *loaded_copy(void) { return __atomic_load_n(&current, __ATOMIC_ACQUIRE); }

/* Fork with the lock held by the forking thread (pthread_atfork's prepare,
 * then parent or child), so that no load is half done in the child and the
 * children's shared copy is made once. The child has only the forking
 * thread, which may release it. */
static void atfork_child(void)
{
    farce_fork_generation++;
    current = NULL;
    pthread_mutex_unlock(&load_lock);
}

static void atfork_parent(void) { pthread_mutex_unlock(&load_lock); }

/* The prepare handler: a process whose runtime started makes the copy its
 * children share (core_copy.c). */
static void atfork_prepare(void)
{
    pthread_mutex_lock(&load_lock);
    if (current) farce_copy_prepare_for_children(current->source, farce_fork_generation + 1);
}

void farce_core_loader_init(void)
{
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

int farce_core_loaded(void) { return loaded_copy() != NULL; }

uint64_t farce_core_generation(void)
{
    struct core_copy *c = loaded_copy();
    return c ? c->generation : UINT64_MAX;
}

const struct core_copy *farce_core_current(void) { return loaded_copy(); }

const char *farce_core_last_failure(void)
{
    pthread_mutex_lock(&load_lock);
    const char *f = failure && failure_generation == farce_fork_generation ? failure : NULL;
    pthread_mutex_unlock(&load_lock);
    return f;
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

/* Records message as this generation's failure. Called with load_lock held. */
static void record_failure(const char *message)
{
    if (!failure || strcmp(failure, message) != 0) {
        const char *copy = strdup(message);
        if (copy) failure = copy; /* the old one is left: see failure */
    }
    failure_generation = farce_fork_generation;
}

void farce_core_check_usable(void)
{
    if (loaded_copy()) return;
    const char *f = farce_core_last_failure();
    if (f) rb_raise(farce_eError, "%s", f);
}

static const struct core_copy *load_locked(char *message, size_t mlen);

const farce_core_copy *farce_core_load(void)
{
    struct core_copy *loaded = loaded_copy();
    if (loaded) return loaded->calls;

    /* the reasons and the advice (a longer message is cut, as it was before) */
    char message[sizeof(((struct reasons *)0)->text) + 1024];
    message[0] = 0;
    pthread_mutex_lock(&load_lock);
    const struct core_copy *c = load_locked(message, sizeof(message));
    pthread_mutex_unlock(&load_lock);
    if (c) return c->calls;
    if (!message[0]) rb_raise(rb_eNoMemError, "farce: cannot allocate the core's table");
    rb_raise(farce_eError, "%s", message);
}

/* Loads the core unless another thread did meanwhile: the copy, or NULL with
 * message set (empty: out of memory). Called with load_lock held. */
static const struct core_copy *load_locked(char *message, size_t mlen)
{
    if (current) return current; /* another Ractor's thread loaded it while this one waited */

    struct core_copy *c = calloc(1, sizeof(*c)); /* never freed: the library it names is never unloaded */
    if (!c) return NULL;
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
            snprintf(message, mlen, "cannot load farce's Go core from %s: %s "
                     "(build it with `rake compile`, or set FARCE_CORE_LIBRARY)", c->source, why.text);
            free(c);
            record_failure(message);
            return NULL;
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
            snprintf(message, mlen, "FARCE_CORE_COPY=%s: expected auto, memfd or tmpfile", mode);
            return NULL; /* the setting's error, not the load's: not recorded */
        }
        r = OPEN_REFUSED;
        if (memfd) r = farce_copy_try_memfd(c, &why, broken, sizeof(broken));
        if (r == OPEN_REFUSED && dirs) r = farce_copy_try_directories(c, &why, broken, sizeof(broken));
        if (r == OPEN_REFUSED) {
            snprintf(message, mlen,
                     "farce cannot start its Go core in this forked child (pid %d, fork generation %llu): "
                     "the parent had started its own, which a child can never use, and loading a fresh copy of "
                     "%s was refused everywhere it was tried (FARCE_CORE_COPY=%s). Tried: %s. To fix: allow "
                     "executable memfds (sysctl vm.memfd_noexec=0, or a seccomp policy that permits "
                     "memfd_create), or set FARCE_CORE_COPY_DIRS to a directory this process can write on a "
                     "filesystem mounted with exec; or create farce schedulers only after fork "
                     "(require farce in the master, run reactors in the workers)",
                     (int)getpid(), (unsigned long long)farce_fork_generation, c->source, mode, why.text);
            free(c);
            record_failure(message);
            return NULL;
        }
    }
    if (r == OPEN_BROKEN) {
        /* A library we cannot use; if its runtime started it stays mapped. */
        free(c);
        snprintf(message, mlen, "%s", broken);
        record_failure(message);
        return NULL;
    }
    c->load_seconds = seconds_since(&t0);
    __atomic_store_n(&current, c, __ATOMIC_RELEASE); /* complete before any thread sees it */
    return c;
}
