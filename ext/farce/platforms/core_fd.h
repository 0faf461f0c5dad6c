/*
 * The descriptor the Go core is handed for one of Ruby's: the same number,
 * except on Windows, where the IOCP driver waits on the SOCKET behind it
 * (win32_compat.c). Apart from sys_io.h because the door into the core
 * (core_door.c) must not see win32_compat.h's poll macro.
 */
#ifndef FARCE_CORE_FD_H
#define FARCE_CORE_FD_H 1

#ifdef _WIN32
int farce_win32_core_fd(int fd);
#define farce_core_fd(fd) farce_win32_core_fd(fd)
#else
static inline int farce_core_fd(int fd) { return fd; }
#endif

#endif
