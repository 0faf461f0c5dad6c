/*
 * Windows only (extconf.rb adds it there): poll(2) over Ruby descriptors and
 * the descriptor the Go core is handed; see win32_compat.h.
 */
#ifdef _WIN32
#include <ruby.h>
#include "platforms/win32_compat.h"

int farce_win32_core_fd(int fd)
{
    if (fd < 0) return -1;
    SOCKET s = rb_w32_get_osfhandle(fd);
    if (s == INVALID_SOCKET || s == 0 || s > (SOCKET)0x7fffffff) return -1;
    return (int)s;
}

int farce_win32_poll(struct pollfd *fds, unsigned long n, int timeout_ms)
{
    /* ruby descriptors in, sockets to WSAPoll, descriptors back out */
    int ready = 0, sockets = 0;
    struct pollfd polled[16];
    unsigned long map[16];
    if (n > 16) n = 16;
    for (unsigned long i = 0; i < n; i++) {
        int fd = (int)fds[i].fd;
        fds[i].revents = 0;
        if (!rb_w32_is_socket(fd)) {
            fds[i].revents = fds[i].events & (POLLIN | POLLOUT);
            if (fds[i].revents) ready++;
            continue;
        }
        polled[sockets].fd = rb_w32_get_osfhandle(fd);
        polled[sockets].events = fds[i].events & (POLLIN | POLLOUT);
        polled[sockets].revents = 0;
        map[sockets++] = i;
    }
    if (!sockets) return ready;
    int r = WSAPoll(polled, (ULONG)sockets, ready ? 0 : timeout_ms);
    if (r < 0) {
        errno = rb_w32_map_errno(WSAGetLastError());
        return ready ? ready : -1;
    }
    for (int k = 0; k < sockets; k++) {
        short got = polled[k].revents;
        fds[map[k]].revents = (short)((got & POLLIN ? POLLIN : 0) | (got & POLLOUT ? POLLOUT : 0) |
                                      (got & POLLHUP ? POLLHUP : 0) | (got & POLLERR ? POLLERR : 0) |
                                      (got & POLLNVAL ? POLLNVAL : 0));
        if (fds[map[k]].revents) ready++;
    }
    return ready;
}
#endif
