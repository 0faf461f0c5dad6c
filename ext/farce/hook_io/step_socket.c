/*
 * The step of a socket, on every platform: one recv or send that never
 * blocks the thread (MSG_DONTWAIT; on Windows the socket itself was made
 * non-blocking when the descriptor table first saw it), after the readiness
 * rules every descriptor with a kernel wait shares (step_readiness.c).
 */
#include <ruby.h>
#include "platforms/sys_io.h"
#include "hook_io/transfer_step.h"

int64_t farce_step_socket(farce_transfer *t)
{
    int64_t r = farce_step_ready_first(t);
    if (r) return r;
    t->l->transfer_calls++; /* stats: system calls per request */
    ssize_t n = t->reading ? recv(t->fd, t->at, t->room, MSG_DONTWAIT) : send(t->fd, t->at, t->room, MSG_DONTWAIT);
    return farce_step_stream_result(t, n);
}
