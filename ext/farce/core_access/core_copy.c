/*
 * Private copies of the Go core, for a child forked after a runtime started
 * (FARCE_CORE_COPY, FARCE_CORE_COPY_DIRS). Such a child never calls that
 * runtime again (30 of 30 children hang at its first park or GC). It loads a
 * fresh copy of the library instead: dlopen returns the already-mapped
 * object for a file it has seen (same device and inode), so the copy must be
 * a new file — an anonymous memfd first (made once by the parent at its first
 * fork and shared by all its children), then the child's own memfd, then an
 * unlinked private file in a directory that allows exec. dlopen also matches
 * names before files, so the name given must be one no loaded copy has. The
 * inherited copies stay mapped, shared with the parent by copy-on-write, and
 * their signal handlers stay in the chain (each Go runtime forwards a signal
 * it does not want to the handler that was installed before it).
 * core_loader.c decides when a copy is needed; core_open.c opens it.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "core_access/core_copy.h"

#ifndef MFD_CLOEXEC
#define MFD_CLOEXEC 0x0001U
#endif
#ifndef MFD_ALLOW_SEALING
#define MFD_ALLOW_SEALING 0x0002U
#endif
#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U /* Linux 6.3: ask for an executable memfd when vm.memfd_noexec=1 */
#endif

/* Copies the library into fd; 0 or an errno. */
static int copy_library(const char *source, int fd)
{
    int in = open(source, O_RDONLY | O_CLOEXEC);
    if (in < 0) return errno;
    struct stat st;
    if (fstat(in, &st) != 0) {
        int e = errno;
        close(in);
        return e;
    }
    off_t off = 0;
    int err = 0;
    while (off < st.st_size) {
        ssize_t n = sendfile(fd, in, &off, (size_t)(st.st_size - off));
        if (n > 0) continue;
        if (n < 0 && errno == EINTR) continue;
        err = n == 0 ? EIO : errno;
        break;
    }
    if (err == EINVAL || err == ENOSYS) { /* sendfile refused this pair: plain read/write */
        char buf[65536];
        err = 0;
        for (;;) {
            ssize_t n = pread(in, buf, sizeof(buf), off);
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) { err = errno; break; }
            if (n == 0) break;
            for (ssize_t done = 0; done < n;) {
                ssize_t w = write(fd, buf + done, (size_t)(n - done));
                if (w < 0 && errno == EINTR) continue;
                if (w <= 0) { err = w < 0 ? errno : EIO; break; }
                done += w;
            }
            if (err) break;
            off += n;
        }
    }
    close(in);
    return err;
}

/* A path naming descriptor fd that no loaded library was opened under.
 * dlopen matches names before files: given "/proc/self/fd/7" it returns an
 * inherited copy that was loaded under that same name in an ancestor (the
 * descriptor number is often the same one again), a dead runtime that hangs.
 * So spellings are tried until dlopen(RTLD_NOLOAD) finds none loaded. */
static int unused_fd_path(int fd, char *buf, size_t len)
{
    for (int dots = 0; dots < 64; dots++) {
        int n = snprintf(buf, len, "/proc/self/fd/");
        for (int i = 0; i < dots && n + 3 < (int)len; i++) n += snprintf(buf + n, len - n, "./");
        snprintf(buf + n, len - n, "%d", fd);
        void *loaded = dlopen(buf, RTLD_LAZY | RTLD_NOLOAD);
        if (!loaded) return 1;
        dlclose(loaded); /* only drops the reference NOLOAD took */
    }
    return 0;
}

#ifdef SYS_memfd_create
/* A memfd holding a copy of the library, or -1 with *step and errno saying
 * what failed. */
static int memfd_copy(const char *source, const char *name, unsigned extra_flags, const char **step)
{
    int fd = (int)syscall(SYS_memfd_create, name, MFD_CLOEXEC | MFD_EXEC | extra_flags);
    if (fd < 0 && errno == EINVAL) fd = (int)syscall(SYS_memfd_create, name, MFD_CLOEXEC | extra_flags); /* < 6.3 */
    if (fd < 0) {
        *step = "memfd_create";
        return -1;
    }
    int err = copy_library(source, fd);
    if (err) {
        close(fd);
        *step = "memfd: copying the library";
        errno = err;
        return -1;
    }
    return fd;
}
#endif

/* ---- one copy for all the children of a process ---------------------------
 * Children loading a copy each would each hold their own 3 MB; children
 * mapping the same file share its pages. So a process whose runtime started
 * makes one sealed memfd copy at its first fork (the pthread_atfork prepare
 * handler), and its children inherit the descriptor. A child dlopens it
 * (no ancestor mapped that file) and closes the descriptor; a child that
 * does not load keeps it for its own children. The parent keeps it open
 * (one descriptor, close-on-exec) for its later forks. */
static int prepared_fd = -1;
static dev_t prepared_dev;
static ino_t prepared_ino;
static int prepare_failed;

static int copy_mode_allows_memfd(void)
{
    const char *mode = getenv("FARCE_CORE_COPY");
    return !mode || !*mode || strcmp(mode, "auto") == 0 || strcmp(mode, "memfd") == 0;
}

void farce_copy_prepare_for_children(const char *source, uint64_t generation)
{
#ifdef SYS_memfd_create
    if (prepared_fd >= 0 || prepare_failed || !copy_mode_allows_memfd()) return;
    char name[64];
    snprintf(name, sizeof(name), "farce-core-gen%llu", (unsigned long long)generation);
    const char *step;
    int fd = memfd_copy(source, name, MFD_ALLOW_SEALING, &step);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        if (fd >= 0) close(fd);
        prepare_failed = 1; /* the children make their own copies (and say why if they cannot) */
        return;
    }
    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
    prepared_fd = fd;
    prepared_dev = st.st_dev;
    prepared_ino = st.st_ino;
#endif
}

/* Whether prepared_fd is still the copy a parent prepared (the program may
 * have closed it and reused the number). */
static int prepared_copy_usable(void)
{
    struct stat st;
    return prepared_fd >= 0 && fstat(prepared_fd, &st) == 0 && st.st_dev == prepared_dev && st.st_ino == prepared_ino;
}

static void forget_prepared_copy(void)
{
    if (prepared_fd >= 0 && prepared_copy_usable()) close(prepared_fd);
    prepared_fd = -1;
    prepare_failed = 0;
}

static enum open_result open_memfd(struct core_copy *c, int fd, const char *label, struct reasons *why, char *broken,
                                   size_t blen)
{
    if (!unused_fd_path(fd, c->mapped, sizeof(c->mapped))) {
        farce_reason_add(why, "%s: every name for descriptor %d is taken by a loaded library", label, fd);
        return OPEN_REFUSED;
    }
    c->kind = "memfd";
    size_t before = why->len;
    farce_reason_add(why, "%s: ", label);
    enum open_result r = farce_open_core(c, c->mapped, why, broken, blen);
    if (r != OPEN_REFUSED) why->len = before, why->text[before] = 0;
    if (r == OPENED) {
        char link[64];
        ssize_t n;
        snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
        n = readlink(link, c->mapped, sizeof(c->mapped) - 1); /* "/memfd:farce-core-genN (deleted)" */
        c->mapped[n > 0 ? n : 0] = 0;
    }
    return r;
}

enum open_result farce_copy_try_memfd(struct core_copy *c, struct reasons *why, char *broken, size_t blen)
{
#ifdef SYS_memfd_create
    if (prepared_copy_usable()) {
        enum open_result r = open_memfd(c, prepared_fd, "the parent's memfd copy", why, broken, blen);
        if (r == OPENED) c->shared = 1;
        forget_prepared_copy(); /* mapped here (or refused): this process's children need another */
        if (r != OPEN_REFUSED) return r;
    }
    prepared_fd = -1;
    prepare_failed = 0;
    char name[64];
    snprintf(name, sizeof(name), "farce-core-gen%llu", (unsigned long long)c->generation);
    const char *step = NULL;
    int fd = memfd_copy(c->source, name, 0, &step);
    if (fd < 0) {
        farce_reason_add(why, "%s: %s", step, strerror(errno));
        return OPEN_REFUSED;
    }
    enum open_result r = open_memfd(c, fd, "memfd", why, broken, blen);
    close(fd); /* the mapping keeps the memory */
    return r;
#else
    farce_reason_add(why, "memfd_create: not available on this system");
    return OPEN_REFUSED;
#endif
}

static enum open_result try_directory(struct core_copy *c, const char *dir, struct reasons *why, char *broken,
                                      size_t blen)
{
    char path[PATH_MAX];
    if (snprintf(path, sizeof(path), "%s/.farce-core-%d-XXXXXX", dir, (int)getpid()) >= (int)sizeof(path)) {
        farce_reason_add(why, "%s: path too long", dir);
        return OPEN_REFUSED;
    }
    int fd = mkostemp(path, O_CLOEXEC);
    if (fd < 0) {
        farce_reason_add(why, "%s: cannot create a file: %s", dir, strerror(errno));
        return OPEN_REFUSED;
    }
    int err = copy_library(c->source, fd);
    if (!err && fchmod(fd, 0500) != 0) err = errno;
    if (err) {
        unlink(path);
        close(fd);
        farce_reason_add(why, "%s: copying %s: %s", dir, c->source, strerror(err));
        return OPEN_REFUSED;
    }
    c->kind = "tmpfile";
    snprintf(c->mapped, sizeof(c->mapped), "%s", path);
    size_t before = why->len;
    farce_reason_add(why, "%s: ", dir);
    enum open_result r = farce_open_core(c, path, why, broken, blen);
    if (r != OPEN_REFUSED) why->len = before, why->text[before] = 0;
    unlink(path); /* private: nobody else opens it, and nothing is left behind */
    close(fd);
    return r;
}

/* Directories for an unlinked copy: FARCE_CORE_COPY_DIRS (colon-separated)
 * replaces the default list $TMPDIR, /dev/shm, /tmp, /var/tmp, the library's
 * own directory. */
enum open_result farce_copy_try_directories(struct core_copy *c, struct reasons *why, char *broken, size_t blen)
{
    char list[PATH_MAX * 2];
    const char *env = getenv("FARCE_CORE_COPY_DIRS");
    if (env && *env) {
        snprintf(list, sizeof(list), "%s", env);
    } else {
        const char *tmpdir = getenv("TMPDIR");
        char libdir[PATH_MAX];
        snprintf(libdir, sizeof(libdir), "%s", c->source);
        char *slash = strrchr(libdir, '/');
        if (slash) *slash = 0; else snprintf(libdir, sizeof(libdir), ".");
        snprintf(list, sizeof(list), "%s%s/dev/shm:/tmp:/var/tmp:%s", tmpdir && *tmpdir ? tmpdir : "",
                 tmpdir && *tmpdir ? ":" : "", libdir);
    }
    char *save = NULL;
    for (char *dir = strtok_r(list, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
        enum open_result r = try_directory(c, dir, why, broken, blen);
        if (r != OPEN_REFUSED) return r;
    }
    return OPEN_REFUSED;
}
