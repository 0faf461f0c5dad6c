/*
 * The few POSIX names the extension uses that a Windows Ruby (mingw-w64,
 * UCRT) lacks, each mapped to what that Ruby offers. Included only on
 * Windows, after ruby.h (whose ruby/win32.h brings winsock2.h first, and
 * maps recv, send, select and friends onto Ruby's descriptor table).
 *
 * Descriptors stay Ruby's (CRT) descriptors everywhere in the extension;
 * only the Go core sees the SOCKET behind one (core_door.c converts).
 */
#ifndef FARCE_WIN32_COMPAT_H
#define FARCE_WIN32_COMPAT_H 1
#ifdef _WIN32

#include <ruby.h>
#include <winsock2.h>

typedef long suseconds_t;

/* Sockets are switched to non-blocking mode when the descriptor table first
 * sees them (fd_table.c), as Ruby on Linux creates them, so a plain recv or
 * send never blocks. */
#define MSG_DONTWAIT 0

/* ruby/win32.h maps these onto Ruby's descriptor table for Ruby's own build
 * only (RUBY_EXPORT); an extension names them itself. */
#undef read
#undef write
#undef pread
#undef pwrite
#define read(f, b, s) rb_w32_read(f, b, s)
#define write(f, b, s) rb_w32_write(f, b, s)
#define pread(f, b, s, o) rb_w32_pread(f, b, s, o)
#define pwrite(f, b, s, o) rb_w32_pwrite(f, b, s, o)

/* poll(2) over Ruby descriptors (winsock2.h's struct pollfd holds a SOCKET;
 * descriptors are converted inside): WSAPoll for sockets; anything else is
 * reported ready for what was asked, since nothing can wait on it (the
 * call that follows blocks). POLLPRI is not asked for (WSAPoll refuses it). */
int farce_win32_poll(struct pollfd *fds, unsigned long n, int timeout_ms);
#define poll(fds, n, timeout_ms) farce_win32_poll(fds, n, timeout_ms)

/* The SOCKET behind a Ruby descriptor as the Go core's IOCP driver takes it
 * (a handle value, which fits an int), or -1 when fd names no open file. */
int farce_win32_core_fd(int fd);

#endif
#endif
