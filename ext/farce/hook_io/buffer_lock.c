/*
 * IO::Buffer locks around farce's transfers (buffer_lock.h).
 *
 * Ruby 4.1 (ruby/ruby#18429) counts locks: every user takes its own and
 * gives back only its own, and the temporary buffer Ruby hands a hook is
 * freed with rb_io_buffer_free_locked, which ends the process (rb_bug) when
 * the count is not the one Ruby took itself. So there a transfer always
 * locks, and unlocks once it is done with the memory.
 *
 * Before 4.1 a lock is one flag, and the buffer Ruby hands a hook is
 * already locked (Ruby made it so): locking it again raises LockedError.
 * There a transfer locks only a buffer nobody locked, and gives back only
 * the lock it took; a buffer locked by its owner stays locked by its owner,
 * which is all a flag can say ("only if nobody has": what 4.1 calls unsafe,
 * since the owner may unlock meanwhile, and why 4.1 counts).
 */
#include "hook_io/buffer_lock.h"

#if !FARCE_BUFFER_LOCKS_COUNTED
/* IO::Buffer#locked? (Ruby 3.1 has no C accessor for it) */
static ID id_locked_p;

/* Whether someone holds buffer's lock flag: the flags rb_io_buffer_get_bytes
 * returns (3.2+; no method call on every io_uring read or write), else the
 * method. */
static int locked(VALUE buffer)
{
#ifdef HAVE_RB_IO_BUFFER_GET_BYTES
    void *base;
    size_t size;
    return (rb_io_buffer_get_bytes(buffer, &base, &size) & RB_IO_BUFFER_LOCKED) != 0;
#else
    return RTEST(rb_funcall(buffer, id_locked_p, 0));
#endif
}
#endif

int farce_buffer_hold(VALUE buffer)
{
#if !FARCE_BUFFER_LOCKS_COUNTED
    if (locked(buffer)) return 0;
#endif
    rb_io_buffer_lock(buffer);
    return 1;
}

static VALUE release_body(VALUE buffer)
{
    rb_io_buffer_unlock(buffer);
    return Qnil;
}

VALUE farce_buffer_held(VALUE buffer, VALUE (*body)(VALUE), VALUE arg)
{
    if (!farce_buffer_hold(buffer)) return body(arg);
    return rb_ensure(body, arg, release_body, buffer);
}

void farce_buffer_lock_init(void)
{
#if !FARCE_BUFFER_LOCKS_COUNTED
    id_locked_p = rb_intern("locked?");
#endif
    /* An extension built against one Ruby's headers and loaded into
     * another of the same X.Y (a master snapshot against its successor)
     * would hold buffers by the wrong rule: with a flag where Ruby counts,
     * a hook's buffer is unlocked too often and Ruby ends the process
     * (rb_bug) when it frees it. IO::Buffer::LOCKED exists exactly where
     * locks are one flag. */
    VALUE has_flag = rb_const_defined_at(rb_cIOBuffer, rb_intern("LOCKED")) ? Qtrue : Qfalse;
    if (RTEST(has_flag) == FARCE_BUFFER_LOCKS_COUNTED) {
        VALUE description = rb_const_get(rb_cObject, rb_intern("RUBY_DESCRIPTION"));
        rb_raise(rb_eLoadError,
                 "farce was built for a Ruby whose IO::Buffer locks are %s, but this Ruby (%" PRIsVALUE
                 ") has %s: rebuild farce for it (`gem pristine farce` or `rake compile`)",
                 FARCE_BUFFER_LOCKS_COUNTED ? "counted (no IO::Buffer::LOCKED)" : "one flag (IO::Buffer::LOCKED)",
                 description, FARCE_BUFFER_LOCKS_COUNTED ? "IO::Buffer::LOCKED, one flag" : "counted locks");
    }
}
