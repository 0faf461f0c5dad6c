/*
 * The lock a transfer holds on an IO::Buffer while a system call or the
 * kernel (an io_uring operation) uses its memory, so that nobody resizes or
 * frees it meanwhile. Taken and given back in pairs around each operation,
 * on every way out of a hook (exceptions, Timeout, Fiber#kill, a completion
 * reaped later): see buffer_lock.c.
 */
#ifndef FARCE_BUFFER_LOCK_H
#define FARCE_BUFFER_LOCK_H 1

#include <ruby.h>
#include <ruby/io/buffer.h>

/* Ruby 4.1 counts IO::Buffer locks (ruby/ruby#18429); earlier Rubies have
 * one flag. extconf.rb asks the Ruby it builds for which it has (the
 * counted lock comes with rb_io_buffer_new_locked), since the headers'
 * RUBY_IO_BUFFER_VERSION did not change with it; farce_buffer_lock_init
 * checks once more against the running Ruby. */
#ifdef HAVE_RB_IO_BUFFER_NEW_LOCKED
#define FARCE_BUFFER_LOCKS_COUNTED 1
#else
#define FARCE_BUFFER_LOCKS_COUNTED 0
#endif

/* Takes this operation's own hold on buffer (raises as IO::Buffer#lock
 * does, before anything is held). Returns whether a lock was taken: pass
 * that to farce_buffer_release exactly once. */
int farce_buffer_hold(VALUE buffer);

/* Gives back what farce_buffer_hold took (nothing when it took nothing). */
static inline void farce_buffer_release(VALUE buffer, int held)
{
    if (held) rb_io_buffer_unlock(buffer);
}

/* Runs body(arg) holding buffer, and gives the hold back however body
 * leaves (return, exception, throw, Fiber#kill). */
VALUE farce_buffer_held(VALUE buffer, VALUE (*body)(VALUE), VALUE arg);

/* Checks that the running Ruby locks buffers the way the headers farce was
 * built against said (raises LoadError naming both when not). */
void farce_buffer_lock_init(void);

#endif
