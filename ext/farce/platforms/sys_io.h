/*
 * The system calls a read or write step makes, by their POSIX names on
 * every platform: recv/send with MSG_DONTWAIT, read/write, pread/pwrite,
 * poll.
 * On Windows they are Ruby's, over its descriptor table (win32_compat.h);
 * elsewhere the system's. Include after ruby.h.
 */
#ifndef FARCE_SYS_IO_H
#define FARCE_SYS_IO_H 1

#ifdef _WIN32
#include "platforms/win32_compat.h"
#else
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>
#endif

#endif
