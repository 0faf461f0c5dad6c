/*
 * The one door into the Go core: its function table (one per loaded copy),
 * the "no core" table, and the typed wrappers of core_door.h. No other C
 * file sees the table.
 */
#include <stdio.h>
#include <stdlib.h>
#include "core_access/core_door.h"
#include "platforms/core_fd.h"
#include <ruby/thread.h> /* after ruby.h: 3.3+ headers need it first */

/* The Go core's exported functions (farce_core.h), all required: the
 * extension and the library are built and shipped together, and
 * farce_core_abi (FARCE_CORE_ABI) says they match. */
struct farce_core_api {
    int64_t (*abi)(void);
    int64_t (*set_handle_base)(int64_t base);
    int64_t (*new_)(const char *backend, char *name, int name_len, char *reason, int reason_len, int *wake_fd);
    int64_t (*close)(int64_t h);
    void (*last_error)(int64_t h, char *buf, int len);
    int64_t (*backends)(char *buf, int len);
    int64_t (*probe)(int fd, uint32_t events);
    int64_t (*stats)(int64_t h, int64_t *out, int n);
    int64_t (*stall_watch)(int64_t h, farce_turn_state *state, int64_t threshold_ns, int signo);
    int64_t (*wait_fd)(int64_t h, int fd, uint32_t events, int64_t timeout_ns, int known, uint64_t *token);
    int64_t (*park)(int64_t h, int64_t timeout_ns, uint64_t *token);
    int64_t (*yield)(int64_t h, uint64_t *token);
    int64_t (*yield_last)(int64_t h, uint64_t *token);
    int64_t (*cancel)(int64_t h, uint64_t token);
    int64_t (*forget_fd)(int64_t h, int fd);
    int64_t (*set_fd_file)(int64_t h, int fd, uint64_t dev, uint64_t ino);
    int64_t (*bind_waits)(int64_t h, farce_fd_wait *waits, int n);
    int64_t (*poll)(int64_t h, int64_t block_ns, farce_completion *out, int capacity);
    int64_t (*poll_batch)(int64_t h, int64_t block_ns, farce_completion *out, int capacity, farce_poll_args *args);
    int64_t (*ops_supported)(int64_t h);
    int64_t (*submit_op)(int64_t h, int kind, int fd, uint64_t ptr, uint64_t len, int64_t offset, uint64_t *token);
    int64_t (*cancel_op)(int64_t h, uint64_t token);
    int64_t (*drain_ops)(int64_t h, int64_t timeout_ns);
    int64_t (*tick)(int64_t h);
};

struct farce_core_copy {
    struct farce_core_api fn;
};

/* FARCE_CORE_CALL(c, name, args...): the one way a wrapper below calls the
 * core's function c->fn.name. On Windows the table holds functions that run
 * the DLL's on a stack of their own (core_door_windows.c). */
#define FARCE_CORE_CALL(c, name, ...) ((c)->fn.name(__VA_ARGS__))

/* ---- resolving a loaded library ------------------------------------------ */

#define RESOLVE(field, symbol)                                               \
    do {                                                                     \
        *(void **)&c->fn.field = farce_core_symbol(dl, symbol);              \
        if (!c->fn.field && !*missing) *missing = symbol;                    \
    } while (0)

farce_core_copy *farce_core_resolve(void *dl, const char **missing)
{
    *missing = NULL;
    farce_core_copy *c = calloc(1, sizeof(*c));
    if (!c) return NULL;
    RESOLVE(abi, "farce_core_abi");
    RESOLVE(set_handle_base, "farce_set_handle_base");
    RESOLVE(new_, "farce_new");
    RESOLVE(close, "farce_close");
    RESOLVE(last_error, "farce_last_error");
    RESOLVE(backends, "farce_backends");
    RESOLVE(probe, "farce_probe");
    RESOLVE(stats, "farce_stats");
    RESOLVE(stall_watch, "farce_stall_watch");
    RESOLVE(wait_fd, "farce_wait_fd");
    RESOLVE(park, "farce_park");
    RESOLVE(yield, "farce_yield");
    RESOLVE(yield_last, "farce_yield_last");
    RESOLVE(cancel, "farce_cancel");
    RESOLVE(forget_fd, "farce_forget_fd");
    RESOLVE(set_fd_file, "farce_set_fd_file");
    RESOLVE(bind_waits, "farce_bind_waits");
    RESOLVE(poll, "farce_poll");
    RESOLVE(poll_batch, "farce_poll_batch");
    RESOLVE(ops_supported, "farce_ops_supported");
    RESOLVE(submit_op, "farce_submit_op");
    RESOLVE(cancel_op, "farce_cancel_op");
    RESOLVE(drain_ops, "farce_drain_ops");
    RESOLVE(tick, "farce_tick");
    const char *more = farce_core_resolve_platform(dl);
    if (more && !*missing) *missing = more;
    if (*missing) {
        free(c);
        return NULL;
    }
    return c;
}
#undef RESOLVE

/* ---- the table before a load, and in a child until it loads its own ------ */

static int64_t none_abi(void) { return 0; }
static int64_t none_base(int64_t base) { return -FARCE_E_HANDLE; }
static int64_t none_new(const char *b, char *n, int nl, char *reason, int rl, int *w)
{
    if (reason && rl > 0) snprintf(reason, (size_t)rl, "farce's Go core is not loaded in this process");
    return -FARCE_E_HANDLE;
}
static int64_t none_h(int64_t h) { return -FARCE_E_HANDLE; }
static void none_last_error(int64_t h, char *buf, int len)
{
    if (buf && len > 0) snprintf(buf, (size_t)len, "a scheduler inherited through fork (its core is the parent's)");
}
static int64_t none_backends(char *buf, int len) { return -FARCE_E_HANDLE; }
static int64_t none_probe(int fd, uint32_t events) { return -FARCE_E_HANDLE; }
static int64_t none_stats(int64_t h, int64_t *o, int n) { return -FARCE_E_HANDLE; }
static int64_t none_stall_watch(int64_t h, farce_turn_state *st, int64_t t, int signo) { return -FARCE_E_HANDLE; }
static int64_t none_wait_fd(int64_t h, int fd, uint32_t e, int64_t t, int k, uint64_t *tok) { return -FARCE_E_HANDLE; }
static int64_t none_park(int64_t h, int64_t t, uint64_t *tok) { return -FARCE_E_HANDLE; }
static int64_t none_yield(int64_t h, uint64_t *tok) { return -FARCE_E_HANDLE; }
static int64_t none_token(int64_t h, uint64_t tok) { return -FARCE_E_HANDLE; }
static int64_t none_fd(int64_t h, int fd) { return -FARCE_E_HANDLE; }
static int64_t none_fd_file(int64_t h, int fd, uint64_t d, uint64_t i) { return -FARCE_E_HANDLE; }
static int64_t none_bind(int64_t h, farce_fd_wait *w, int n) { return -FARCE_E_HANDLE; }
static int64_t none_poll(int64_t h, int64_t b, farce_completion *o, int c) { return -FARCE_E_HANDLE; }
static int64_t none_poll_batch(int64_t h, int64_t b, farce_completion *o, int c, farce_poll_args *a)
{
    return -FARCE_E_HANDLE;
}
static int64_t none_submit(int64_t h, int k, int fd, uint64_t p, uint64_t l, int64_t off, uint64_t *tok)
{
    return -FARCE_E_HANDLE;
}
static int64_t none_drain(int64_t h, int64_t timeout_ns) { return -FARCE_E_HANDLE; }

static const farce_core_copy no_core = {{
    .abi = none_abi, .set_handle_base = none_base, .new_ = none_new, .close = none_h,
    .last_error = none_last_error, .backends = none_backends, .probe = none_probe, .stats = none_stats,
    .stall_watch = none_stall_watch, .wait_fd = none_wait_fd, .park = none_park, .yield = none_yield,
    .yield_last = none_yield, .cancel = none_token, .forget_fd = none_fd, .set_fd_file = none_fd_file,
    .bind_waits = none_bind,
    .poll = none_poll, .poll_batch = none_poll_batch, .ops_supported = none_h, .submit_op = none_submit,
    .cancel_op = none_token, .drain_ops = none_drain, .tick = none_h,
}};

const farce_core_copy *farce_core_none(void) { return &no_core; }

/* ---- the wrappers ----------------------------------------------------------- */

int64_t farce_core_abi_of(const farce_core_copy *c) { return FARCE_CORE_CALL(c, abi); }

int64_t farce_core_set_handle_base(const farce_core_copy *c, int64_t base)
{
    return FARCE_CORE_CALL(c, set_handle_base, base);
}

int64_t farce_core_new(const farce_core_copy *c, const char *backend, char *name, int name_len, char *reason,
                       int reason_len, int *wake_fd)
{
    farce_stack_guard();
    return FARCE_CORE_CALL(c, new_, backend, name, name_len, reason, reason_len, wake_fd);
}

int64_t farce_core_close(const farce_core_copy *c, int64_t h) { return FARCE_CORE_CALL(c, close, h); }

int64_t farce_core_backends(const farce_core_copy *c, char *buf, int len)
{
    return FARCE_CORE_CALL(c, backends, buf, len);
}

int64_t farce_core_probe(const farce_core_copy *c, int fd, uint32_t events)
{
    farce_stack_guard();
    return FARCE_CORE_CALL(c, probe, farce_core_fd(fd), events);
}

int64_t farce_core_stats(const farce_core_copy *c, int64_t h, int64_t *out, int n)
{
    farce_stack_guard();
    return FARCE_CORE_CALL(c, stats, h, out, n);
}

int64_t farce_core_stall_watch(const farce_core_copy *c, int64_t h, farce_turn_state *state, int64_t threshold_ns,
                               int signo)
{
    farce_stack_guard();
    return FARCE_CORE_CALL(c, stall_watch, h, state, threshold_ns, signo);
}

void farce_core_raise(const farce_core_copy *c, int64_t h, int64_t code, const char *what, VALUE backend)
{
    char msg[512] = "";
    if (h) (void)FARCE_CORE_CALL(c, last_error, h, msg, sizeof(msg));
    if (code == -FARCE_E_HANDLE) rb_raise(farce_eError, "%s: the scheduler is closed", what);
    if (code == -FARCE_E_ARGUMENT) rb_raise(rb_eArgError, "%s: %s", what, msg);
    if (code < 0 && code > -4096) {
        rb_syserr_fail_str((int)-code, rb_sprintf("%s (farce %"PRIsVALUE" backend): %s", what, backend, msg));
    }
    rb_raise(farce_eError, "%s failed (code %lld): %s", what, (long long)code, msg);
}

int64_t farce_core_wait_fd(const farce_core_copy *c, int64_t h, int fd, uint32_t events, int64_t timeout_ns,
                           int known, uint64_t *token)
{
    farce_stack_guard();
    return FARCE_CORE_CALL(c, wait_fd, h, farce_core_fd(fd), events, timeout_ns, known, token);
}

int64_t farce_core_park(const farce_core_copy *c, int64_t h, int64_t timeout_ns, uint64_t *token)
{
    farce_stack_guard();
    return FARCE_CORE_CALL(c, park, h, timeout_ns, token);
}

int64_t farce_core_yield(const farce_core_copy *c, int64_t h, int last, uint64_t *token)
{
    farce_stack_guard();
    return last ? FARCE_CORE_CALL(c, yield_last, h, token) : FARCE_CORE_CALL(c, yield, h, token);
}

int64_t farce_core_cancel(const farce_core_copy *c, int64_t h, uint64_t token)
{
    farce_stack_guard();
    return FARCE_CORE_CALL(c, cancel, h, token);
}

int64_t farce_core_cancel_quietly(const farce_core_copy *c, int64_t h, uint64_t token)
{
    return FARCE_CORE_CALL(c, cancel, h, token);
}

int64_t farce_core_forget_fd(const farce_core_copy *c, int64_t h, int fd)
{
    farce_stack_guard();
    return FARCE_CORE_CALL(c, forget_fd, h, farce_core_fd(fd));
}

int64_t farce_core_forget_fd_quietly(const farce_core_copy *c, int64_t h, int fd)
{
    return FARCE_CORE_CALL(c, forget_fd, h, farce_core_fd(fd));
}

int64_t farce_core_set_fd_file(const farce_core_copy *c, int64_t h, int fd, uint64_t dev, uint64_t ino)
{
    farce_stack_guard();
    return FARCE_CORE_CALL(c, set_fd_file, h, fd, dev, ino);
}

int64_t farce_core_bind_waits(const farce_core_copy *c, int64_t h, farce_fd_wait *waits, int n)
{
    farce_stack_guard();
    return FARCE_CORE_CALL(c, bind_waits, h, waits, n);
}

int64_t farce_core_poll_batch(const farce_core_copy *c, int64_t h, farce_completion *out, int capacity,
                              farce_poll_args *args)
{
    farce_stack_guard();
    return FARCE_CORE_CALL(c, poll_batch, h, 0, out, capacity, args);
}

int64_t farce_core_poll_now(const farce_core_copy *c, int64_t h, farce_completion *out, int capacity)
{
    return FARCE_CORE_CALL(c, poll, h, 0, out, capacity);
}

struct blocking_poll {
    const farce_core_copy *c;
    int64_t h;
    int64_t block_ns;
    farce_completion *out;
    int capacity;
    int64_t result;
};

static void *poll_body(void *p)
{
    struct blocking_poll *a = p;
    a->result = FARCE_CORE_CALL(a->c, poll, a->h, a->block_ns, a->out, a->capacity);
    return NULL;
}

int64_t farce_core_poll_blocking(const farce_core_copy *c, int64_t h, int64_t block_ns, farce_completion *out,
                                 int capacity, int *wake_fd)
{
    struct blocking_poll a = {c, h, block_ns, out, capacity, 0};
    rb_nogvl(poll_body, &a, farce_write_wake, wake_fd, RB_NOGVL_UBF_ASYNC_SAFE);
    return a.result;
}

int64_t farce_core_tick(const farce_core_copy *c, int64_t h)
{
    if (ruby_stack_check()) return 0; /* only an optimisation: skipped where the stack is short */
    return FARCE_CORE_CALL(c, tick, h);
}

int farce_core_ops_supported(const farce_core_copy *c, int64_t h) { return FARCE_CORE_CALL(c, ops_supported, h) == 1; }

int64_t farce_core_submit_op(const farce_core_copy *c, int64_t h, int kind, int fd, uint64_t ptr, uint64_t len,
                             int64_t offset, uint64_t *token)
{
    return FARCE_CORE_CALL(c, submit_op, h, kind, fd, ptr, len, offset, token);
}

int64_t farce_core_cancel_op(const farce_core_copy *c, int64_t h, uint64_t token)
{
    farce_stack_guard();
    return FARCE_CORE_CALL(c, cancel_op, h, token);
}

int64_t farce_core_cancel_op_quietly(const farce_core_copy *c, int64_t h, uint64_t token)
{
    return FARCE_CORE_CALL(c, cancel_op, h, token);
}

struct drain_call {
    const farce_core_copy *c;
    int64_t h;
    int64_t slice_ns;
    int64_t result;
};

static void *drain_body(void *p)
{
    struct drain_call *a = p;
    a->result = FARCE_CORE_CALL(a->c, drain_ops, a->h, a->slice_ns);
    return NULL;
}

int64_t farce_core_drain_ops_blocking(const farce_core_copy *c, int64_t h, int64_t slice_ns, int *wake_fd)
{
    struct drain_call a = {c, h, slice_ns, 0};
    rb_nogvl(drain_body, &a, wake_fd ? farce_write_wake : NULL, wake_fd, RB_NOGVL_UBF_ASYNC_SAFE);
    return a.result;
}
