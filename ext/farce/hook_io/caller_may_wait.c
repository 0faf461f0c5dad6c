/*
 * Whether the Ruby method that called a read or write hook never waits:
 * io_transfer.c's loop asks it of a transfer of length 0, and only when the
 * transfer would wait (docs/behaviour.md, "Which callers may wait").
 *
 * Ruby 3.1 to 3.4 pass a length of 0 for IO#read_nonblock and for a blocking
 * read alike, and nothing else in what the hook receives, nor anything Ruby
 * offers an extension, tells them apart: the IO has no flag for it (both
 * set O_NONBLOCK), and the hook's own frame is the scheduler's method. The
 * one trace is the method that called the hook, read from Ruby's call stack
 * (rb_profile_frames). On Ruby 4.1's single-transfer hooks the question is
 * gone: every caller gets -EAGAIN and Ruby waits itself (io_transfer_v4.c).
 */
#include <string.h>
#include <ruby.h>
#include <ruby/debug.h>
#include "hook_io/caller_may_wait.h"

/* Whether the Ruby method that called this hook never waits: a method
 * whose name ends in _nonblock (IO#read_nonblock and IO#write_nonblock
 * themselves, io.rb) among the few frames above this hook. A false "yes"
 * only costs the slow path (-EAGAIN, then Ruby's io_wait); a false "no"
 * would park a nonblocking call, so the search is generous. Every read
 * that would wait asks (two per pipe ping-pong round trip), so the common
 * case is answered from two frames: the hook's own and the one below it.
 * When that one is a C method (IO#read, IO#gets, IO#sysread, ...), it is
 * the IO method that called the hook, with nothing in between (Ruby's IO
 * code calls the scheduler from inside the method's own frame), and its
 * name is the answer. Only when it is Ruby code (Async's scheduler, a
 * subclass's io_read calling super, the Ruby loop's routing) are up to
 * NONBLOCK_FRAMES frames searched. No line numbers are asked for (Ruby
 * computes one per frame otherwise, by a search in the frame's line
 * table), and each frame's kind is cached by the frame's identity. */
#define NONBLOCK_FRAMES 8

enum frame_kind { FRAME_RUBY = 1, FRAME_C, FRAME_NONBLOCK };

/* A frame from rb_profile_frames is a method entry or an instruction
 * sequence. The cache's keys are marked by frame_keeper (rb_gc_mark pins
 * them): a cached frame is neither freed nor moved, so no other method can
 * come to have its address while it is cached. One entry per hash slot; a
 * collision replaces the older answer.
 *
 * Every Ractor's threads read and replace entries at the same time (each
 * runs under a lock of its own), so an entry is one word: the frame's
 * address with its kind in the low bits, which an object's address leaves
 * free (heap slots are aligned to at least 8 bytes). One relaxed load or
 * store of a word is what a plain one compiles to; a reader sees either
 * the old answer or the new one, never one frame with another's kind. */
#define FRAME_CACHE 64 /* a power of two */
#define KIND_BITS ((uintptr_t)7)
static uintptr_t frame_cache[FRAME_CACHE];

static void frame_keeper_mark(void *cache)
{
    uintptr_t *c = cache;
    for (int i = 0; i < FRAME_CACHE; i++) {
        /* every Ractor is stopped while the GC marks: nothing changes under this */
        VALUE frame = (VALUE)(c[i] & ~KIND_BITS);
        if (frame) rb_gc_mark(frame);
    }
}

static const rb_data_type_t frame_keeper_type = {
    "Farce::FrameCache",
    {frame_keeper_mark, NULL, NULL},
    0, 0, RUBY_TYPED_FREE_IMMEDIATELY,
};

static int ends_with_nonblock(VALUE name)
{
    if (!RB_TYPE_P(name, T_STRING)) return 0;
    long len = RSTRING_LEN(name);
    return len > 9 && memcmp(RSTRING_PTR(name) + len - 9, "_nonblock", 9) == 0;
}

static enum frame_kind frame_kind(VALUE frame)
{
    if (RB_SPECIAL_CONST_P(frame) || ((uintptr_t)frame & KIND_BITS)) return FRAME_RUBY;
    uintptr_t *slot = &frame_cache[((uint64_t)frame * 0x9E3779B97F4A7C15ull) >> 58];
    uintptr_t cached = __atomic_load_n(slot, __ATOMIC_RELAXED);
    if ((cached & ~KIND_BITS) == (uintptr_t)frame) return (enum frame_kind)(cached & KIND_BITS);
    enum frame_kind kind = ends_with_nonblock(rb_profile_frame_method_name(frame)) ? FRAME_NONBLOCK
                         : NIL_P(rb_profile_frame_path(frame))                   ? FRAME_C /* no instruction sequence */
                                                                                 : FRAME_RUBY;
    __atomic_store_n(slot, (uintptr_t)frame | (uintptr_t)kind, __ATOMIC_RELAXED);
    return kind;
}

int farce_caller_is_nonblock(void)
{
    VALUE frames[NONBLOCK_FRAMES];
    /* frames[0] is the hook (a C method), frames[1] what called it */
    int n = rb_profile_frames(0, 2, frames, NULL); /* NULL: no lines (every Ruby since 2.1) */
    if (n == 2) {
        enum frame_kind k = frame_kind(frames[1]);
        if (k != FRAME_RUBY) return k == FRAME_NONBLOCK;
    }
    n = rb_profile_frames(0, NONBLOCK_FRAMES, frames, NULL);
    for (int i = 0; i < n; i++)
        if (frame_kind(frames[i]) == FRAME_NONBLOCK) return 1;
    return 0;
}

void farce_caller_may_wait_init(void)
{
    /* not NULL: Ruby calls no mark function for a data object without data */
    rb_gc_register_mark_object(TypedData_Wrap_Struct(rb_cObject, &frame_keeper_type, frame_cache));
}

/* Farce.__caller_is_nonblock?: what the hooks would answer if this method
 * were one (its caller is the frame asked about), for the tests that hold
 * the answer for each kind of caller (test/test_nonblocking_callers.rb). */
static VALUE caller_is_nonblock_p(VALUE mod) { return farce_caller_is_nonblock() ? Qtrue : Qfalse; }

void farce_caller_may_wait_define(VALUE mFarce)
{
    rb_define_singleton_method(mFarce, "__caller_is_nonblock?", caller_is_nonblock_p, 0);
}
