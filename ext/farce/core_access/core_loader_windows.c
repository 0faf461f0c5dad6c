/*
 * Finding and loading the Go core on Windows (farce_core.dll), in place of
 * core_loader.c, core_open.c, core_copy.c and core_signals.c: Windows has no
 * fork, so there is one load per process and never a private copy, and no
 * signal masks to arrange around the runtime's start. What stays is the
 * rule of docs/cgo-hazards.md that `require "farce"` must not start the Go
 * runtime: the DLL is loaded on first use (LoadLibrary), and never freed.
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

static struct core_copy *current;
static char *failure;

void farce_core_loader_init(void) {}

int farce_core_loaded(void) { return current != NULL; }

uint64_t farce_core_generation(void) { return current ? current->generation : UINT64_MAX; }

const struct core_copy *farce_core_current(void) { return current; }

const char *farce_core_last_failure(void) { return failure; }

int farce_runtimes_mapped(void) { return current ? 1 : 0; }

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

NORETURN(static void raise_failure(const char *message));
static void raise_failure(const char *message)
{
    free(failure);
    failure = strdup(message);
    rb_raise(farce_eError, "%s", message);
}

void farce_core_check_usable(void)
{
    if (!current && failure) rb_raise(farce_eError, "%s", failure);
}

const farce_core_copy *farce_core_load(void)
{
    if (current) return current->calls;

    struct core_copy *c = calloc(1, sizeof(*c)); /* never freed: the DLL is never unloaded */
    if (!c) rb_raise(rb_eNoMemError, "farce: cannot allocate the core's table");
    core_path(c->source, sizeof(c->source));
    snprintf(c->mapped, sizeof(c->mapped), "%s", c->source);
    c->kind = "file";
    c->pid = getpid();
    timespec_get(&c->loaded_at, TIME_UTC);
    int64_t t0 = farce_monotonic_ns();

    char message[PATH_MAX + 512];
    /* With its own folder searched first for what it needs (none today but
     * Windows' own DLLs and the C runtime). */
    HMODULE dll = LoadLibraryExA(c->source, NULL, LOAD_WITH_ALTERED_SEARCH_PATH);
    if (!dll) {
        snprintf(message, sizeof(message), "cannot load farce's Go core from %s: LoadLibrary failed with Windows error %lu "
                 "(build it with `rake compile:windows`, or set FARCE_CORE_LIBRARY)", c->source, GetLastError());
        free(c);
        raise_failure(message);
    }
    const char *missing = NULL;
    c->calls = farce_core_resolve((void *)dll, &missing);
    if (!c->calls) {
        /* never FreeLibrary a Go DLL: its runtime cannot be unloaded */
        snprintf(message, sizeof(message), "farce's Go core at %s lacks %s: rebuild it", c->source,
                 missing ? missing : "memory for its function table");
        free(c);
        raise_failure(message);
    }
    c->abi = farce_core_abi_of(c->calls); /* the first call: waits until the runtime started */
    c->handle = (void *)dll;
    if (c->abi != FARCE_CORE_ABI) {
        snprintf(message, sizeof(message), "farce's Go core at %s speaks ABI %lld, this extension %d: rebuild it",
                 c->source, (long long)c->abi, FARCE_CORE_ABI);
        free(c);
        raise_failure(message);
    }
    c->load_seconds = (double)(farce_monotonic_ns() - t0) / 1e9;
    current = c;
    return c->calls;
}
