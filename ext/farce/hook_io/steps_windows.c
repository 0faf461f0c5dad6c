/*
 * Which step moves the bytes of each kind of descriptor on Windows; see
 * transfer_step.h. Only sockets have a kernel wait there (the IOCP driver
 * polls them through AFD): a pipe is polled from its fiber, a file or a
 * console goes to the worker pool. The core performs no completion
 * operations there: both columns are the same.
 */
#include <string.h>
#include <ruby.h>
#include "platforms/sys_io.h"
#include "hook_io/stream_offload_windows.h"
#include "hook_io/io_transfer.h"
#include "hook_io/transfer_step.h"

void farce_park_pipe(farce_transfer *t);

/* no kernel wait but a socket's: the front ends' io_wait polls the rest
 * (stream_offload_windows.c) */
#define POLLED farce_win32_stream_ready, farce_win32_wait_stream

void farce_transfer_steps_init(void)
{
    static const farce_fd_steps one[FARCE_FD_KINDS] = {
        [FARCE_FD_SOCKET] = {farce_step_socket, farce_step_positional, farce_park_readiness, NULL, NULL},
        [FARCE_FD_PIPE] = {farce_step_pipe, farce_step_positional, farce_park_pipe, POLLED},
        [FARCE_FD_FILE] = {farce_step_file, farce_step_positional, farce_park_readiness, POLLED},
        [FARCE_FD_TERMINAL] = {farce_step_file, farce_step_positional, farce_park_readiness, POLLED},
    };
    for (int kind = 0; kind < FARCE_FD_KINDS; kind++)
        farce_fd_steps_by_kind[kind][0] = farce_fd_steps_by_kind[kind][1] = one[kind];
}

/* For io_transfer_v4.c: a socket's call, or a plain one (a pipe that holds
 * bytes: the caller asked farce_unpolled_read_would_block first). */
ssize_t farce_stream_nowait(farce_fd_ent *f, int fd, int reading, void *at, size_t room)
{
    if (f->socket) return reading ? recv(fd, at, room, MSG_DONTWAIT) : send(fd, at, room, MSG_DONTWAIT);
    return reading ? read(fd, at, room) : write(fd, at, room);
}

int farce_ready_without_core(int fd, int events)
{
    return rb_w32_is_socket(fd) ? -1 : farce_win32_stream_ready(fd, events); /* the core can only ask sockets */
}
