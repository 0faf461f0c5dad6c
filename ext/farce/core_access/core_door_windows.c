/*
 * The door into the Go core on Windows (core_door.h): every call runs on the
 * thread's core call stack (core_call_windows.c: Go cannot be entered from a
 * fiber stack in a big fiber-pool allocation there). core_door.c's table
 * holds, for each function of the DLL, one of the same signature defined
 * here, which puts the arguments in a name_call record and has name_run,
 * on that stack, hand them to the DLL's function, whose result comes back
 * in the record. One DLL per process (no fork): the DLL's functions are
 * kept here once.
 */
#include <string.h>
#include "core_access/core_door.h"
#include <windows.h> /* after ruby.h, which brings winsock2.h first */
#include "core_access/core_call_windows.h"

/* The records and their runs, by the number of arguments. */
#define CORE_RECORD_0(name)                                                  \
    struct name##_call { int64_t (*fn)(void); int64_t r; };                  \
    static void name##_run(void *p) { struct name##_call *k = p; k->r = k->fn(); }
#define CORE_RECORD_1(name, T1)                                              \
    struct name##_call { int64_t (*fn)(T1); T1 a1; int64_t r; };             \
    static void name##_run(void *p) { struct name##_call *k = p; k->r = k->fn(k->a1); }
#define CORE_RECORD_2(name, T1, T2)                                          \
    struct name##_call { int64_t (*fn)(T1, T2); T1 a1; T2 a2; int64_t r; };  \
    static void name##_run(void *p) { struct name##_call *k = p; k->r = k->fn(k->a1, k->a2); }
#define CORE_RECORD_3(name, T1, T2, T3)                                      \
    struct name##_call { int64_t (*fn)(T1, T2, T3); T1 a1; T2 a2; T3 a3; int64_t r; }; \
    static void name##_run(void *p) { struct name##_call *k = p; k->r = k->fn(k->a1, k->a2, k->a3); }
#define CORE_RECORD_4(name, T1, T2, T3, T4)                                  \
    struct name##_call { int64_t (*fn)(T1, T2, T3, T4); T1 a1; T2 a2; T3 a3; T4 a4; int64_t r; }; \
    static void name##_run(void *p) { struct name##_call *k = p; k->r = k->fn(k->a1, k->a2, k->a3, k->a4); }
#define CORE_RECORD_5(name, T1, T2, T3, T4, T5)                              \
    struct name##_call { int64_t (*fn)(T1, T2, T3, T4, T5); T1 a1; T2 a2; T3 a3; T4 a4; T5 a5; int64_t r; }; \
    static void name##_run(void *p)                                          \
    {                                                                        \
        struct name##_call *k = p;                                           \
        k->r = k->fn(k->a1, k->a2, k->a3, k->a4, k->a5);                     \
    }
#define CORE_RECORD_6(name, T1, T2, T3, T4, T5, T6)                          \
    struct name##_call {                                                     \
        int64_t (*fn)(T1, T2, T3, T4, T5, T6);                               \
        T1 a1; T2 a2; T3 a3; T4 a4; T5 a5; T6 a6;                            \
        int64_t r;                                                           \
    };                                                                       \
    static void name##_run(void *p)                                          \
    {                                                                        \
        struct name##_call *k = p;                                           \
        k->r = k->fn(k->a1, k->a2, k->a3, k->a4, k->a5, k->a6);              \
    }
#define CORE_RECORD_7(name, T1, T2, T3, T4, T5, T6, T7)                      \
    struct name##_call {                                                     \
        int64_t (*fn)(T1, T2, T3, T4, T5, T6, T7);                           \
        T1 a1; T2 a2; T3 a3; T4 a4; T5 a5; T6 a6; T7 a7;                     \
        int64_t r;                                                           \
    };                                                                       \
    static void name##_run(void *p)                                          \
    {                                                                        \
        struct name##_call *k = p;                                           \
        k->r = k->fn(k->a1, k->a2, k->a3, k->a4, k->a5, k->a6, k->a7);       \
    }


/* The DLL's function (real_name) and the one core_door.c calls instead
 * (on_stack_name), for a function of n arguments of these types. */
#define ON_STACK(n, name, params, args, ...)                                 \
    CORE_RECORD_##n(name, __VA_ARGS__)                                       \
    static int64_t (*real_##name) params;                                    \
    static int64_t on_stack_##name params                                    \
    {                                                                        \
        struct name##_call k = {real_##name, ARGS_##n args};                 \
        farce_core_call_on_stack(name##_run, &k);                            \
        return k.r;                                                          \
    }
#define ARGS_0(...)
#define ARGS_1(...) __VA_ARGS__
#define ARGS_2(...) __VA_ARGS__
#define ARGS_3(...) __VA_ARGS__
#define ARGS_4(...) __VA_ARGS__
#define ARGS_5(...) __VA_ARGS__
#define ARGS_6(...) __VA_ARGS__
#define ARGS_7(...) __VA_ARGS__

/* One per function of core_door.c's table (a type that differs from the
 * table's is an incompatible-pointer error there, GCC 14 on). */
CORE_RECORD_0(abi)
static int64_t (*real_abi)(void);
static int64_t on_stack_abi(void)
{
    struct abi_call k = {real_abi};
    farce_core_call_on_stack(abi_run, &k);
    return k.r;
}
ON_STACK(1, set_handle_base, (int64_t a1), (a1), int64_t)
ON_STACK(6, new_, (const char *a1, char *a2, int a3, char *a4, int a5, int *a6), (a1, a2, a3, a4, a5, a6), const char *,
         char *, int, char *, int, int *)
ON_STACK(1, close, (int64_t a1), (a1), int64_t)
ON_STACK(2, backends, (char *a1, int a2), (a1, a2), char *, int)
ON_STACK(2, probe, (int a1, uint32_t a2), (a1, a2), int, uint32_t)
ON_STACK(3, stats, (int64_t a1, int64_t *a2, int a3), (a1, a2, a3), int64_t, int64_t *, int)
ON_STACK(4, stall_watch, (int64_t a1, farce_turn_state *a2, int64_t a3, int a4), (a1, a2, a3, a4), int64_t,
         farce_turn_state *, int64_t, int)
ON_STACK(6, wait_fd, (int64_t a1, int a2, uint32_t a3, int64_t a4, int a5, uint64_t *a6), (a1, a2, a3, a4, a5, a6),
         int64_t, int, uint32_t, int64_t, int, uint64_t *)
ON_STACK(3, park, (int64_t a1, int64_t a2, uint64_t *a3), (a1, a2, a3), int64_t, int64_t, uint64_t *)
ON_STACK(2, yield, (int64_t a1, uint64_t *a2), (a1, a2), int64_t, uint64_t *)
ON_STACK(2, yield_last, (int64_t a1, uint64_t *a2), (a1, a2), int64_t, uint64_t *)
ON_STACK(2, cancel, (int64_t a1, uint64_t a2), (a1, a2), int64_t, uint64_t)
ON_STACK(2, forget_fd, (int64_t a1, int a2), (a1, a2), int64_t, int)
ON_STACK(4, set_fd_file, (int64_t a1, int a2, uint64_t a3, uint64_t a4), (a1, a2, a3, a4), int64_t, int, uint64_t,
         uint64_t)
ON_STACK(3, bind_waits, (int64_t a1, farce_fd_wait *a2, int a3), (a1, a2, a3), int64_t, farce_fd_wait *, int)
ON_STACK(4, poll, (int64_t a1, int64_t a2, farce_completion *a3, int a4), (a1, a2, a3, a4), int64_t, int64_t,
         farce_completion *, int)
ON_STACK(5, poll_batch, (int64_t a1, int64_t a2, farce_completion *a3, int a4, farce_poll_args *a5),
         (a1, a2, a3, a4, a5), int64_t, int64_t, farce_completion *, int, farce_poll_args *)
ON_STACK(1, ops_supported, (int64_t a1), (a1), int64_t)
ON_STACK(7, submit_op, (int64_t a1, int a2, int a3, uint64_t a4, uint64_t a5, int64_t a6, uint64_t *a7),
         (a1, a2, a3, a4, a5, a6, a7), int64_t, int, int, uint64_t, uint64_t, int64_t, uint64_t *)
ON_STACK(2, cancel_op, (int64_t a1, uint64_t a2), (a1, a2), int64_t, uint64_t)
ON_STACK(2, drain_ops, (int64_t a1, int64_t a2), (a1, a2), int64_t, int64_t)
ON_STACK(1, tick, (int64_t a1), (a1), int64_t)

/* farce_last_error returns nothing: its record has a result no one reads. */
struct last_error_call { void (*fn)(int64_t, char *, int); int64_t a1; char *a2; int a3; int64_t r; };
static void last_error_run(void *p)
{
    struct last_error_call *k = p;
    k->fn(k->a1, k->a2, k->a3);
}
static void (*real_last_error)(int64_t, char *, int);
static void on_stack_last_error(int64_t a1, char *a2, int a3)
{
    struct last_error_call k = {real_last_error, a1, a2, a3};
    farce_core_call_on_stack(last_error_run, &k);
}

/* The DLL's farce_wake_number, for farce_write_wake (not in the table: one
 * DLL per process, so its wake entry point is the process's). */
CORE_RECORD_1(wake_number, int)
static int64_t (*volatile real_wake_number)(int n);

#define SYMBOL(symbol, name) {symbol, (void **)&real_##name, (void *)on_stack_##name}
static const struct {
    const char *symbol;
    void **real;
    void *on_stack;
} symbols[] = {
    SYMBOL("farce_core_abi", abi), SYMBOL("farce_set_handle_base", set_handle_base), SYMBOL("farce_new", new_),
    SYMBOL("farce_close", close), SYMBOL("farce_last_error", last_error), SYMBOL("farce_backends", backends),
    SYMBOL("farce_probe", probe), SYMBOL("farce_stats", stats), SYMBOL("farce_stall_watch", stall_watch),
    SYMBOL("farce_wait_fd", wait_fd), SYMBOL("farce_park", park), SYMBOL("farce_yield", yield),
    SYMBOL("farce_yield_last", yield_last), SYMBOL("farce_cancel", cancel), SYMBOL("farce_forget_fd", forget_fd),
    SYMBOL("farce_set_fd_file", set_fd_file), SYMBOL("farce_bind_waits", bind_waits), SYMBOL("farce_poll", poll),
    SYMBOL("farce_poll_batch", poll_batch), SYMBOL("farce_ops_supported", ops_supported),
    SYMBOL("farce_submit_op", submit_op), SYMBOL("farce_cancel_op", cancel_op), SYMBOL("farce_drain_ops", drain_ops),
    SYMBOL("farce_tick", tick),
};

void *farce_core_symbol(void *dl, const char *symbol)
{
    void *f = (void *)GetProcAddress((HMODULE)dl, symbol);
    if (!f) return NULL;
    for (size_t i = 0; i < sizeof(symbols) / sizeof(symbols[0]); i++) {
        if (strcmp(symbols[i].symbol, symbol) != 0) continue;
        *symbols[i].real = f;
        return symbols[i].on_stack;
    }
    return NULL; /* a function with no way onto the core's stack must not be called */
}

const char *farce_core_resolve_platform(void *dl)
{
    *(void **)&real_wake_number = (void *)GetProcAddress((HMODULE)dl, "farce_wake_number");
    return real_wake_number ? NULL : "farce_wake_number";
}

void farce_write_wake(void *p)
{
    int64_t (*wake)(int) = real_wake_number;
    /* on this thread's own core stack, whichever thread runs the unblock
     * function: never the blocked poll's */
    if (!wake) return;
    struct wake_number_call k = {wake, *(int *)p};
    farce_core_call_on_stack(wake_number_run, &k);
}
