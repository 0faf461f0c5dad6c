/*
 * Opening one file of the Go core and starting its runtime: the dlopen, its
 * function table (core_door.c), the first call that waits for the runtime's
 * threads, all under the signal masks of core_signals.c, then the ABI check
 * and the handle range of the fork generation. Which file to open (the
 * library itself, or a private copy of it) is core_loader.c's and
 * core_copy.c's business; this also keeps the reasons a place was refused,
 * for their error messages.
 */
#include <dlfcn.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include "core_access/core_open.h"
#include "core_access/core_signals.h"

static int runtimes_mapped; /* Go runtimes mapped here: inherited ones plus our own */

int farce_runtimes_mapped(void) { return runtimes_mapped; }

/* ---- reasons, collected while trying places ------------------------------ */

/* Appends to the reasons; a new reason (separated by "; ") unless `more`
 * continues the last one. */
static void reason_vadd(struct reasons *r, int more, const char *fmt, va_list ap)
{
    if (r->len + 3 >= sizeof(r->text)) return;
    if (r->len && !more) r->len += snprintf(r->text + r->len, sizeof(r->text) - r->len, "; ");
    int n = vsnprintf(r->text + r->len, sizeof(r->text) - r->len, fmt, ap);
    if (n > 0) r->len += (size_t)n;
    if (r->len >= sizeof(r->text)) r->len = sizeof(r->text) - 1;
}

void farce_reason_more(struct reasons *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    reason_vadd(r, 1, fmt, ap);
    va_end(ap);
}

void farce_reason_add(struct reasons *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    reason_vadd(r, 0, fmt, ap);
    va_end(ap);
}

/* ---- dlopen with the runtime's start under our signal mask --------------- */

enum open_result farce_open_core(struct core_copy *c, const char *file, struct reasons *why, char *broken, size_t blen)
{
    sigset_t saved;
    farce_core_signals_block(&saved);

    void *handle = dlopen(file, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        farce_core_signals_restore(&saved);
        farce_reason_more(why, "%s", dlerror()); /* after the caller's "place: " */
        return OPEN_REFUSED;
    }
    const char *missing = NULL;
    c->calls = farce_core_resolve(handle, &missing);
    if (!c->calls && !missing) missing = "memory for its function table";
    if (missing) {
        farce_core_signals_restore(&saved);
        /* never dlclose a Go library: the runtime cannot be unloaded */
        snprintf(broken, blen, "farce's Go core at %s lacks %s: rebuild with `rake compile`", c->source, missing);
        return OPEN_BROKEN;
    }
    /* The first call waits until the runtime finished starting its threads,
     * all of them with the mask blocked above. */
    c->abi = farce_core_abi_of(c->calls);
    farce_core_signals_restore(&saved);
    farce_core_signals_after_start();
    c->handle = handle;
    runtimes_mapped++;
    if (c->abi != FARCE_CORE_ABI) {
        snprintf(broken, blen, "farce's Go core at %s speaks ABI %lld, this extension %d: rebuild with `rake compile`",
                 c->source, (long long)c->abi, FARCE_CORE_ABI);
        return OPEN_BROKEN;
    }
    /* Each generation's handles in a range of their own (see handles.go). */
    farce_core_set_handle_base(c->calls, (int64_t)(c->generation & 0x7fffff) << 40);
    return OPENED;
}
