//go:build ignore

/*
 * The non-inline parts of glue.h: error translation for core calls, and the
 * handles of front ends collected without close.
 */
#include <stdlib.h>
#include <string.h>
#include "glue.h"
#include <ruby/thread.h> /* after ruby.h: 3.3+ headers need it first */

void farce_raise_core_error(int64_t handle, int64_t code, const char *what, VALUE backend)
{
    char msg[512] = "";
    if (handle) farce_core.last_error(handle, msg, sizeof(msg));
    if (code == -FARCE_E_HANDLE) rb_raise(farce_eError, "%s: the scheduler is closed", what);
    if (code == -FARCE_E_ARGUMENT) rb_raise(rb_eArgError, "%s: %s", what, msg);
    if (code < 0 && code > -4096) {
        rb_syserr_fail_str((int)-code, rb_sprintf("%s (farce %"PRIsVALUE" backend): %s", what, backend, msg));
    }
    rb_raise(farce_eError, "%s failed (code %lld): %s", what, (long long)code, msg);
}

/* A GC free function may run on any fiber stack, where calling Go is not
 * allowed (rule 5), so handles of schedulers and selectors collected without
 * close wait here until the next one is created. */
static int64_t *orphans;
static long norphans, orphans_cap;

void farce_core_release_later(int64_t handle)
{
    if (norphans == orphans_cap) {
        long cap = orphans_cap ? orphans_cap * 2 : 8;
        int64_t *n = realloc(orphans, cap * sizeof(*n));
        if (!n) return; /* out of memory in a free function: leak the handle */
        orphans = n;
        orphans_cap = cap;
    }
    orphans[norphans++] = handle;
}

void farce_core_release_orphans(void)
{
    while (norphans > 0) farce_core.close(orphans[--norphans]);
}

struct blocking_poll {
    int64_t handle;
    int64_t block_ns;
    farce_completion *out;
    int capacity;
    int64_t result;
};

static void *poll_body(void *p)
{
    struct blocking_poll *a = p;
    a->result = farce_core.poll(a->handle, a->block_ns, a->out, a->capacity);
    return NULL;
}

int64_t farce_poll_without_gvl(int64_t handle, int *wake_fd, int64_t block_ns, farce_completion *out, int capacity)
{
    struct blocking_poll a = {handle, block_ns, out, capacity, 0};
    rb_nogvl(poll_body, &a, farce_write_wake, wake_fd, RB_NOGVL_UBF_ASYNC_SAFE);
    return a.result;
}

void *farce_slot_table_grow(void *items, uint32_t *count, uint32_t index, size_t size)
{
    uint32_t n = *count ? *count : 256;
    while (n <= index) n *= 2;
    items = ruby_xrealloc2(items, n, size);
    memset((char *)items + (size_t)*count * size, 0, (size_t)(n - *count) * size);
    *count = n;
    return items;
}
