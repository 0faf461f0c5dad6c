/*
 * The step of a socket, on every platform: one recv or send that never
 * blocks the thread (MSG_DONTWAIT; on Windows the socket itself was made
 * non-blocking when the descriptor table first saw it). Also the readiness
 * rules every descriptor with a kernel wait shares (transfer_step.h): a
 * stream the last read drained, and a descriptor in blocking mode, are
 * waited on before the call, and a step that would block parks in the
 * loop's readiness wait.
 */
#include <ruby.h>
#include "platforms/sys_io.h"
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

int64_t farce_step_socket(farce_transfer *t)
{
    int64_t r = farce_step_ready_first(t);
    if (r) return r;
    t->l->transfer_calls++; /* stats: system calls per request */
    ssize_t n = t->reading ? recv(t->fd, t->at, t->room, MSG_DONTWAIT) : send(t->fd, t->at, t->room, MSG_DONTWAIT);
    return farce_step_stream_result(t, n);
}
