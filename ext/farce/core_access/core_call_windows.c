/*
 * Windows: every call into the Go core runs on a stack of its own, one per
 * thread, instead of on the caller's.
 *
 * Why: a thread Go did not start enters Go through the runtime's needm, and
 * on Windows that asks VirtualQuery for the allocation holding the current
 * stack pointer and takes all of it below the pointer for the thread's
 * system stack; when that reaches more than 64 MB down, Go throws "bad g0
 * stack". Ruby's fiber pool carves thousands of fiber stacks out of one
 * allocation, so a fiber high up in a big pool could not call Go at all. A
 * Windows fiber made with CreateFiberEx has a small stack in an allocation
 * of its own: a call switches to it (SwitchToFiber), calls Go there, and
 * switches back. It costs two switches per call, next to the needm every
 * call from C already pays on Windows.
 *
 * SwitchToFiber wants the calling thread to be a Windows fiber: one that is
 * not is made one on its first call (ConvertThreadToFiberEx). Ruby's
 * coroutines on Windows swap stacks by themselves and are no Windows fibers,
 * so all of a thread's Ruby fibers run on that one thread fiber, and the one
 * that makes a call is the one switched back to. A Go call never calls back
 * into Ruby and never switches fibers, so one stack per thread is enough.
 */
#include <stdlib.h>
#include "core_access/core_call_windows.h"
#include <windows.h>

/* Go's system stack for the call: Go takes it from the allocation's base,
 * less 16 KB of slop. 1 MB is what a Windows thread gets by default; only
 * the pages used are committed, 64 KB at first. */
#define CORE_STACK_RESERVE (1u << 20)
#define CORE_STACK_COMMIT (64u << 10)

struct core_stack {
    SLIST_ENTRY retired; /* first: it must be 16-byte aligned, as malloc's memory is */
    void *fiber;         /* the Windows fiber that owns the stack */
    void *caller;        /* the fiber to switch back to after the call */
    void (*body)(void *);
    void *arg;
};

static INIT_ONCE setup_once = INIT_ONCE_STATIC_INIT;
static volatile LONG set_up;

/* Each thread's core stack, in a thread-local slot (TlsAlloc: a compiler's
 * __thread would need libgcc's DLL), not a fiber-local one: the core fiber
 * must see what the thread fiber that switched to it sees. */
static DWORD stack_slot = TLS_OUT_OF_INDEXES;

/* A thread's core stack outlives the thread unless someone deletes it. A
 * fiber-local slot holds it in the thread fiber this file made, whose slot
 * callback the system runs as the thread exits; the callback only puts the
 * stack on the retired list (it runs while the system takes the thread's
 * fiber-local data down, no place to delete another fiber), and the next
 * thread that makes its core stack deletes the retired ones. */
static DWORD exit_slot = FLS_OUT_OF_INDEXES;
static SLIST_HEADER retired;

static void WINAPI retire_at_thread_exit(void *p)
{
    struct core_stack *s = p;
    InterlockedPushEntrySList(&retired, &s->retired);
}

static BOOL CALLBACK setup(INIT_ONCE *once, void *param, void **context)
{
    InitializeSListHead(&retired);
    stack_slot = TlsAlloc(); /* none left: every call is made where it is */
    exit_slot = FlsAlloc(retire_at_thread_exit); /* none left: stacks of exited threads stay */
    InterlockedExchange(&set_up, 1);
    return TRUE;
}

static void delete_retired(void)
{
    SLIST_ENTRY *e = InterlockedFlushSList(&retired);
    while (e) {
        struct core_stack *s = (struct core_stack *)e;
        e = e->Next;
        DeleteFiber(s->fiber); /* not running: its thread is gone */
        free(s);
    }
}

/* The core fiber: one call per switch to it, then back to its caller. */
static void WINAPI core_stack_main(void *param)
{
    struct core_stack *s = param;
    for (;;) {
        s->body(s->arg);
        SwitchToFiber(s->caller);
    }
}

/* The calling thread's core stack, made on its first call; NULL when
 * Windows refuses a fiber (no memory). */
static struct core_stack *make_core_stack(void)
{
    if (stack_slot == TLS_OUT_OF_INDEXES) return NULL;
    delete_retired();
    struct core_stack *s = calloc(1, sizeof(*s));
    if (!s) return NULL;
    /* A thread that is a fiber already was made one by someone else, who
     * may switch it to other fibers: its exit slot would be theirs, so its
     * core stack is never retired (nothing in Ruby does that). */
    int converted = 0;
    if (!IsThreadAFiber()) {
        if (!ConvertThreadToFiberEx(NULL, FIBER_FLAG_FLOAT_SWITCH)) {
            free(s);
            return NULL;
        }
        converted = 1;
    }
    s->fiber = CreateFiberEx(CORE_STACK_COMMIT, CORE_STACK_RESERVE, FIBER_FLAG_FLOAT_SWITCH, core_stack_main, s);
    if (!s->fiber) {
        if (converted) ConvertFiberToThread();
        free(s);
        return NULL;
    }
    if (converted && exit_slot != FLS_OUT_OF_INDEXES) FlsSetValue(exit_slot, s);
    TlsSetValue(stack_slot, s);
    return s;
}

void farce_core_call_on_stack(void (*body)(void *), void *arg)
{
    if (!set_up) InitOnceExecuteOnce(&setup_once, setup, NULL, NULL);
    struct core_stack *s = stack_slot == TLS_OUT_OF_INDEXES ? NULL : TlsGetValue(stack_slot);
    if (!s) s = make_core_stack();
    /* Already on the core stack (a call made while on it), or no core stack
     * to be had: call here. On a pooled fiber stack the latter is the old
     * "bad g0 stack", said by Go. */
    void *current = GetCurrentFiber();
    if (!s || current == s->fiber) {
        body(arg);
        return;
    }
    /* Switching back restores the stack bounds in the thread's TIB that the
     * thread fiber had when it was made (wine's SwitchToFiber saves no stack
     * base), but a Ruby coroutine has set them to its own stack; they are
     * put back as they were before the switch. */
    NT_TIB *tib = (NT_TIB *)NtCurrentTeb();
    void *stack_base = tib->StackBase;
    void *stack_limit = tib->StackLimit;
    s->body = body;
    s->arg = arg;
    s->caller = current;
    SwitchToFiber(s->fiber);
    tib->StackBase = stack_base;
    tib->StackLimit = stack_limit;
}
