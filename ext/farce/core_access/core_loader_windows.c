/*
 * Finding and loading the Go core on Windows (farce_core.dll), in place of
 * core_loader.c, core_open.c, core_copy.c and core_signals.c: Windows has no
 * fork, so there is one load per process and never a private copy, and no
 * signal masks to arrange around the runtime's start. What stays is the
 * rule of docs/cgo-hazards.md that `require "farce"` must not start the Go
 * runtime: the DLL is loaded on first use (LoadLibrary), and never freed.
 * Every Ractor's threads may ask for it at once: the load holds a lock, and
 * the loaded copy is published complete (as core_loader.c does).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "core_access/core_loader.h" /* ruby.h first: it brings winsock2.h before windows.h */
#include "core_access/core_open.h"
#include "platforms/clock.h"
#include <windows.h>

volatile uint64_t farce_fork_generation; /* stays 0: no fork here */

static SRWLOCK load_lock = SRWLOCK_INIT;
static struct core_copy *current; /* written under load_lock, published complete */
/* Written under load_lock; never freed (another thread may be reading it),
 * replaced only by a message that says something else. */
static const char *failure;

static struct core_copy *loaded_copy(void) { return __atomic_load_n(&current, __ATOMIC_ACQUIRE); }

void farce_core_loader_init(void) {}

int farce_core_loaded(void) { return loaded_copy() != NULL; }

uint64_t farce_core_generation(void)
{
    struct core_copy *c = loaded_copy();
    return c ? c->generation : UINT64_MAX;
}

const struct core_copy *farce_core_current(void) { return loaded_copy(); }

const char *farce_core_last_failure(void)
{
    AcquireSRWLockExclusive(&load_lock);
    const char *f = failure;
    ReleaseSRWLockExclusive(&load_lock);
    return f;
}

int farce_runtimes_mapped(void) { return loaded_copy() ? 1 : 0; }

/* The core sits next to this extension unless FARCE_CORE_LIBRARY says otherwise. */
static void core_path(char *buf, size_t len)
{
    const char *env = getenv("FARCE_CORE_LIBRARY");
    if (env && *env) {
        snprintf(buf, len, "%s", env);
        return;
    }
    HMODULE self = NULL;
    char own[MAX_PATH];
    DWORD n = 0;
    if (GetModuleHandleExA(GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS | GET_MODULE_HANDLE_EX_FLAG_UNCHANGED_REFCOUNT,
                           (LPCSTR)(void *)farce_core_load, &self))
        n = GetModuleFileNameA(self, own, sizeof(own));
    if (n > 0 && n < sizeof(own)) {
        char *slash = strrchr(own, '\\');
        char *other = strrchr(own, '/');
        if (other > slash) slash = other;
        if (slash) {
            snprintf(buf, len, "%.*s\\farce_core.dll", (int)(slash - own), own);
            return;
        }
    }
    snprintf(buf, len, "farce_core.dll");
}

/* Called with load_lock held. */
static void record_failure(const char *message)
{
    if (!failure || strcmp(failure, message) != 0) {
        const char *copy = strdup(message);
        if (copy) failure = copy; /* the old one is left: see failure */
    }
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

    char message[PATH_MAX + 512] = "";
    AcquireSRWLockExclusive(&load_lock);
    const struct core_copy *c = load_locked(message, sizeof(message));
    ReleaseSRWLockExclusive(&load_lock);
    if (c) return c->calls;
    if (!message[0]) rb_raise(rb_eNoMemError, "farce: cannot allocate the core's table");
    rb_raise(farce_eError, "%s", message); /* no Ruby call with the lock held */
}

/* The loaded copy, or NULL with message set (empty: out of memory). Called
 * with load_lock held. */
static const struct core_copy *load_locked(char *message, size_t mlen)
{
    if (current) return current; /* another thread loaded it while this one waited */

    struct core_copy *c = calloc(1, sizeof(*c)); /* never freed: the DLL is never unloaded */
    if (!c) return NULL;
    core_path(c->source, sizeof(c->source));
    snprintf(c->mapped, sizeof(c->mapped), "%s", c->source);
    c->kind = "file";
    c->pid = getpid();
    timespec_get(&c->loaded_at, TIME_UTC);
    int64_t t0 = farce_monotonic_ns();

    /* With its own folder searched first for what it needs (none today but
     * Windows' own DLLs and the C runtime). */
    HMODULE dll = LoadLibraryExA(c->source, NULL, LOAD_WITH_ALTERED_SEARCH_PATH);
    if (!dll) {
        snprintf(message, mlen, "cannot load farce's Go core from %s: LoadLibrary failed with Windows error %lu "
                 "(build it with `rake compile:windows`, or set FARCE_CORE_LIBRARY)", c->source, GetLastError());
        free(c);
        record_failure(message);
        return NULL;
    }
    const char *missing = NULL;
    c->calls = farce_core_resolve((void *)dll, &missing);
    if (!c->calls) {
        /* never FreeLibrary a Go DLL: its runtime cannot be unloaded */
        snprintf(message, mlen, "farce's Go core at %s lacks %s: rebuild it", c->source,
                 missing ? missing : "memory for its function table");
        free(c);
        record_failure(message);
        return NULL;
    }
    c->abi = farce_core_abi_of(c->calls); /* the first call: waits until the runtime started */
    c->handle = (void *)dll;
    if (c->abi != FARCE_CORE_ABI) {
        snprintf(message, mlen, "farce's Go core at %s speaks ABI %lld, this extension %d: rebuild it",
                 c->source, (long long)c->abi, FARCE_CORE_ABI);
        free(c);
        record_failure(message);
        return NULL;
    }
    c->load_seconds = (double)(farce_monotonic_ns() - t0) / 1e9;
    __atomic_store_n(&current, c, __ATOMIC_RELEASE); /* complete before any thread sees it */
    return c;
}
