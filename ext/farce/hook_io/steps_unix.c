/*
 * Which step moves the bytes of each kind of descriptor on Linux (and other
 * POSIX systems); see transfer_step.h. The second column is for a loop
 * whose core performs completion operations (io_uring): sockets and pipes
 * become operations when they would block; a terminal cannot (its reads are
 * not streams), and a file's step asks for itself.
 */
#include <string.h>
#include <ruby.h>
#include "platforms/sys_io.h"
#include "hook_io/io_transfer.h"
#include "hook_io/transfer_step.h"

void farce_step_file_init(void);
void farce_step_pipe_init(void);

/* A regular file is always ready: nothing to wait for. */
static int file_ready(int fd, int events) { return events; }
static int64_t file_wait(farce_loop *l, VALUE io, int fd, int events, int64_t timeout_ns) { return events; }

#define WAITED farce_park_readiness, NULL, NULL /* a kernel wait: the front ends ask the core */
#define FILE_STEPS farce_step_file, farce_step_file, farce_park_readiness, file_ready, file_wait

void farce_transfer_steps_init(void)
{
    static const farce_fd_steps by_kind[FARCE_FD_KINDS][2] = {
        [FARCE_FD_SOCKET] = {{farce_step_socket, farce_step_positional, WAITED},
                             {farce_step_completion_socket, farce_step_positional, WAITED}},
        [FARCE_FD_PIPE] = {{farce_step_pipe, farce_step_positional, WAITED},
                           {farce_step_completion_pipe, farce_step_positional, WAITED}},
        [FARCE_FD_FILE] = {{FILE_STEPS}, {FILE_STEPS}},
        [FARCE_FD_TERMINAL] = {{farce_step_terminal, farce_step_positional, WAITED},
                               {farce_step_terminal, farce_step_positional, WAITED}},
    };
    memcpy(farce_fd_steps_by_kind, by_kind, sizeof(by_kind));
    farce_step_file_init();
    farce_step_pipe_init();
}

ssize_t farce_stream_nowait(farce_fd_ent *f, int fd, int reading, void *at, size_t room)
{
    if (f->socket) return reading ? recv(fd, at, room, MSG_DONTWAIT) : send(fd, at, room, MSG_DONTWAIT);
    if (f->stream) return farce_pipe_call(f, fd, reading, at, room);
    return farce_terminal_call(f, fd, reading, at, room);
}

int farce_ready_without_core(int fd, int events) { return -1; }
