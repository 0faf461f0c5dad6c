/*
 * The readiness rules every step of a descriptor with a kernel wait shares
 * (a socket's, a pipe's, a terminal's; transfer_step.h): a stream the last
 * read drained, and a descriptor in blocking mode, are waited on before the
 * call (a drained stream is rarely ready at once, and a blocking one would
 * block the thread), and a step that would block parks in the loop's
 * readiness wait.
 */
#include <ruby.h>
#include "hook_io/transfer_step.h"

/* (the inline part, transfer_step.h: not right after a park, which tries
 * the call whatever was known before; and only a drained read or a
 * blocking descriptor gets here) */
int64_t farce_step_ready_first_slow(farce_transfer *t)
{
    farce_fd_ent *f = t->f;
    int drained = t->reading && f->drained;
    if (drained) f->drained = 0;
    if (farce_transfer_may_wait(t)) {
        t->known = drained ? FARCE_KNOWN_DRAINED : FARCE_KNOWN_NOTHING;
        return -EAGAIN;
    }
    /* read_nonblock/write_nonblock: a drained stream is just tried; a
     * blocking descriptor only when it is ready now */
    if (f->blocking && farce_loop_wait_fd(t->l, t->fd, farce_transfer_events(t), 0, FARCE_KNOWN_NOTHING) == 0)
        return -EAGAIN;
    return 0;
}

void farce_park_readiness(farce_transfer *t)
{
    farce_loop *l = t->l;
    int known = t->known;
    t->known = FARCE_KNOWN_NOT_READY;
    if (RB_UNLIKELY(!l->handle) && known == FARCE_KNOWN_NOT_READY) {
        /* The call found it not ready, and the selector's lazy core is
         * needed now. When that core performs operations the descriptor's
         * steps are those from now on: the next step is tried at once and
         * becomes an operation, as if the core had been there all along. */
        const farce_fd_steps *before = t->f->steps;
        farce_loop_start(l, NULL);
        if (t->f->steps != before) return;
    }
    farce_loop_wait_fd(l, t->fd, farce_transfer_events(t), -1, known);
    t->waited = 1;
}

