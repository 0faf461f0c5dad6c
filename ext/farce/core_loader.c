/*
 * Loading the Go core, once per fork generation. The rules here come from
 * docs/cgo-hazards.md, each one a hang or a crash when broken:
 *  - `require "farce"` must not start the Go runtime: it is dlopen'ed on the
 *    first Farce::Scheduler.new (or selector wait), and never unloaded.
 *  - It is loaded with asynchronous signals blocked in the loading thread,
 *    so Go's threads inherit that mask and process signals reach Ruby's.
 *  - After Go is up, sa_mask is cleared on Go's SIGSEGV/SIGBUS handlers,
 *    otherwise a thread that longjmps out of a guard-page fault keeps every
 *    signal blocked.
 *  - A child forked after a runtime started never calls that runtime again
 *    (30 of 30 children hang at its first park or GC). It loads a fresh copy
 *    of the library instead: dlopen returns the already-mapped object for a
 *    file it has seen (same device and inode), so the copy must be a new
 *    file — an anonymous memfd first (made once by the parent at its first
 *    fork and shared by all its children), then the child's own memfd, then
 *    an unlinked private file in a directory that allows exec. dlopen also
 *    matches names before files, so the name given must be one no loaded
 *    copy has. The inherited copies stay mapped, shared
 *    with the parent by copy-on-write, and their signal handlers stay in the
 *    chain (each Go runtime forwards a signal it does not want to the handler
 *    that was installed before it).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "core_loader.h"

#ifndef MFD_CLOEXEC
#define MFD_CLOEXEC 0x0001U
#endif
#ifndef MFD_ALLOW_SEALING
#define MFD_ALLOW_SEALING 0x0002U
#endif
#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U /* Linux 6.3: ask for an executable memfd when vm.memfd_noexec=1 */
#endif

volatile uint64_t farce_fork_generation;

/* One loaded library: the process's first load, or a copy in a child. */
struct core_copy {
    farce_core_copy *calls; /* its function table (core_door.c) */
    void *handle;
    uint64_t generation;   /* farce_fork_generation it was loaded in */
    pid_t pid;             /* process that loaded it */
    const char *kind;      /* "file", "memfd" or "tmpfile" */
    int shared;            /* the memfd copy the parent prepared for all its children */
    char source[PATH_MAX]; /* the library file it was read from */
    char mapped[PATH_MAX]; /* what dlopen was given (a copy is unlinked after) */
    struct timespec loaded_at;
    double load_seconds;   /* copy + dlopen + runtime start */
    int64_t abi;
};

static struct core_copy *current; /* the copy this process calls; NULL before the first load */
static int runtimes_mapped;       /* Go runtimes mapped here: inherited ones plus our own */

/* The last failed attempt to load in this generation, repeated by
 * farce_core_check_usable so that a selector fails at creation. */
static char *failure;
static uint64_t failure_generation;

static void atfork_child(void)
{
    farce_fork_generation++;
    current = NULL;
}

static VALUE core_info(VALUE mod);
static void atfork_prepare(void);

void farce_core_loader_init(void)
{
    pthread_atfork(atfork_prepare, NULL, atfork_child);
    rb_define_singleton_method(rb_define_module("Farce"), "core_info", core_info, 0);
}

int farce_core_loaded(void) { return current != NULL; }

uint64_t farce_core_generation(void) { return current ? current->generation : UINT64_MAX; }

/* The core sits next to this extension unless FARCE_CORE_LIBRARY says otherwise. */
static void core_path(char *buf, size_t len)
{
    const char *env = getenv("FARCE_CORE_LIBRARY");
    if (env && *env) {
        snprintf(buf, len, "%s", env);
        return;
    }
    Dl_info info;
    if (dladdr((void *)farce_core_load, &info) && info.dli_fname) {
        const char *slash = strrchr(info.dli_fname, '/');
        int dirlen = slash ? (int)(slash - info.dli_fname) : 1;
        snprintf(buf, len, "%.*s/libfarce_core.so", dirlen, slash ? info.dli_fname : ".");
        return;
    }
    snprintf(buf, len, "libfarce_core.so");
}

static void clear_handler_mask(int sig)
{
    struct sigaction sa;
    if (sigaction(sig, NULL, &sa) == 0) {
        sigemptyset(&sa.sa_mask);
        sigaction(sig, &sa, NULL);
    }
}

/* ---- reasons, collected while trying places ------------------------------ */

struct reasons {
    char text[4096];
    size_t len;
};

/* Appends to the reasons; a new reason (separated by "; ") unless `more`
 * continues the last one. */
static void reason_vadd(struct reasons *r, int more, const char *fmt, va_list ap)
{
    if (r->len + 3 >= sizeof(r->text)) return;
    if (r->len && !more) r->len += snprintf(r->text + r->len, sizeof(r->text) - r->len, "; ");
    int n = vsnprintf(r->text + r->len, sizeof(r->text) - r->len, fmt, ap);
    if (n > 0) r->len += (size_t)n;
    if (r->len >= sizeof(r->text)) r->len = sizeof(r->text) - 1;
}

static void reason_more(struct reasons *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    reason_vadd(r, 1, fmt, ap);
    va_end(ap);
}

static void reason_add(struct reasons *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    reason_vadd(r, 0, fmt, ap);
    va_end(ap);
}

/* ---- dlopen with the runtime's start under our signal mask --------------- */

enum open_result { OPENED, OPEN_REFUSED, OPEN_BROKEN };

/* Opens `file` and starts its runtime. OPEN_REFUSED: dlopen failed (another
 * place may work; the reason is added). OPEN_BROKEN: the library is not one
 * this extension can use (message in broken). */
static enum open_result open_core(struct core_copy *c, const char *file, struct reasons *why, char *broken, size_t blen)
{
    sigset_t async_signals, saved;
    sigfillset(&async_signals);
    sigdelset(&async_signals, SIGSEGV);
    sigdelset(&async_signals, SIGBUS);
    sigdelset(&async_signals, SIGFPE);
    sigdelset(&async_signals, SIGILL);
    sigdelset(&async_signals, SIGTRAP);
    sigdelset(&async_signals, SIGSYS);
    pthread_sigmask(SIG_BLOCK, &async_signals, &saved);

    void *handle = dlopen(file, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        pthread_sigmask(SIG_SETMASK, &saved, NULL);
        reason_more(why, "%s", dlerror()); /* after the caller's "place: " */
        return OPEN_REFUSED;
    }
    const char *missing = NULL;
    c->calls = farce_core_resolve(handle, &missing);
    if (!c->calls && !missing) missing = "memory for its function table";
    if (missing) {
        pthread_sigmask(SIG_SETMASK, &saved, NULL);
        /* never dlclose a Go library: the runtime cannot be unloaded */
        snprintf(broken, blen, "farce's Go core at %s lacks %s: rebuild with `rake compile`", c->source, missing);
        return OPEN_BROKEN;
    }
    /* The first call waits until the runtime finished starting its threads,
     * all of them with the mask blocked above. */
    c->abi = farce_core_abi_of(c->calls);
    pthread_sigmask(SIG_SETMASK, &saved, NULL);
    clear_handler_mask(SIGSEGV);
    clear_handler_mask(SIGBUS);
    c->handle = handle;
    runtimes_mapped++;
    if (c->abi != FARCE_CORE_ABI) {
        snprintf(broken, blen, "farce's Go core at %s speaks ABI %lld, this extension %d: rebuild with `rake compile`",
                 c->source, (long long)c->abi, FARCE_CORE_ABI);
        return OPEN_BROKEN;
    }
    /* Each generation's handles in a range of their own (see export.go). */
    farce_core_set_handle_base(c->calls, (int64_t)(c->generation & 0x7fffff) << 40);
    return OPENED;
}

/* ---- copies --------------------------------------------------------------- */

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

static void atfork_prepare(void)
{
#ifdef SYS_memfd_create
    if (!current || prepared_fd >= 0 || prepare_failed || !copy_mode_allows_memfd()) return;
    char name[64];
    snprintf(name, sizeof(name), "farce-core-gen%llu", (unsigned long long)farce_fork_generation + 1);
    const char *step;
    int fd = memfd_copy(current->source, name, MFD_ALLOW_SEALING, &step);
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
        reason_add(why, "%s: every name for descriptor %d is taken by a loaded library", label, fd);
        return OPEN_REFUSED;
    }
    c->kind = "memfd";
    size_t before = why->len;
    reason_add(why, "%s: ", label);
    enum open_result r = open_core(c, c->mapped, why, broken, blen);
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

static enum open_result try_memfd(struct core_copy *c, struct reasons *why, char *broken, size_t blen)
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
    snprintf(name, sizeof(name), "farce-core-gen%llu", (unsigned long long)farce_fork_generation);
    const char *step = NULL;
    int fd = memfd_copy(c->source, name, 0, &step);
    if (fd < 0) {
        reason_add(why, "%s: %s", step, strerror(errno));
        return OPEN_REFUSED;
    }
    enum open_result r = open_memfd(c, fd, "memfd", why, broken, blen);
    close(fd); /* the mapping keeps the memory */
    return r;
#else
    reason_add(why, "memfd_create: not available on this system");
    return OPEN_REFUSED;
#endif
}

static enum open_result try_directory(struct core_copy *c, const char *dir, struct reasons *why, char *broken,
                                      size_t blen)
{
    char path[PATH_MAX];
    if (snprintf(path, sizeof(path), "%s/.farce-core-%d-XXXXXX", dir, (int)getpid()) >= (int)sizeof(path)) {
        reason_add(why, "%s: path too long", dir);
        return OPEN_REFUSED;
    }
    int fd = mkostemp(path, O_CLOEXEC);
    if (fd < 0) {
        reason_add(why, "%s: cannot create a file: %s", dir, strerror(errno));
        return OPEN_REFUSED;
    }
    int err = copy_library(c->source, fd);
    if (!err && fchmod(fd, 0500) != 0) err = errno;
    if (err) {
        unlink(path);
        close(fd);
        reason_add(why, "%s: copying %s: %s", dir, c->source, strerror(err));
        return OPEN_REFUSED;
    }
    c->kind = "tmpfile";
    snprintf(c->mapped, sizeof(c->mapped), "%s", path);
    size_t before = why->len;
    reason_add(why, "%s: ", dir);
    enum open_result r = open_core(c, path, why, broken, blen);
    if (r != OPEN_REFUSED) why->len = before, why->text[before] = 0;
    unlink(path); /* private: nobody else opens it, and nothing is left behind */
    close(fd);
    return r;
}

/* Directories for an unlinked copy: FARCE_CORE_COPY_DIRS (colon-separated)
 * replaces the default list $TMPDIR, /dev/shm, /tmp, /var/tmp, the library's
 * own directory. */
static enum open_result try_directories(struct core_copy *c, struct reasons *why, char *broken, size_t blen)
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

/* ---- farce_core_load ------------------------------------------------------- */

static double seconds_since(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

NORETURN(static void raise_failure(const char *message));
static void raise_failure(const char *message)
{
    free(failure);
    failure = strdup(message);
    failure_generation = farce_fork_generation;
    rb_raise(farce_eError, "%s", message);
}

void farce_core_check_usable(void)
{
    if (!current && failure && failure_generation == farce_fork_generation) rb_raise(farce_eError, "%s", failure);
}

const farce_core_copy *farce_core_load(void)
{
    if (current) return current->calls;

    struct core_copy *c = calloc(1, sizeof(*c)); /* never freed: the library it names is never unloaded */
    if (!c) rb_raise(rb_eNoMemError, "farce: cannot allocate the core's table");
    core_path(c->source, sizeof(c->source));
    c->generation = farce_fork_generation;
    c->pid = getpid();
    clock_gettime(CLOCK_REALTIME, &c->loaded_at);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);

    struct reasons why = {"", 0};
    char broken[PATH_MAX + 256] = "";
    enum open_result r;
    if (runtimes_mapped == 0) {
        /* No runtime here yet: the library itself, as a plain dlopen. */
        c->kind = "file";
        snprintf(c->mapped, sizeof(c->mapped), "%s", c->source);
        r = open_core(c, c->source, &why, broken, sizeof(broken));
        if (r == OPEN_REFUSED) {
            char message[sizeof(why.text) + 256];
            snprintf(message, sizeof(message), "cannot load farce's Go core from %s: %s "
                     "(build it with `rake compile`, or set FARCE_CORE_LIBRARY)", c->source, why.text);
            free(c);
            raise_failure(message);
        }
    } else {
        /* A child of a process whose runtime started: a fresh copy. The
         * FARCE_CORE_COPY knob picks the places: auto (memfd, then
         * directories), memfd, or tmpfile (directories only). */
        const char *mode = getenv("FARCE_CORE_COPY");
        if (!mode || !*mode) mode = "auto";
        int memfd = strcmp(mode, "tmpfile") != 0, dirs = strcmp(mode, "memfd") != 0;
        if (strcmp(mode, "auto") && strcmp(mode, "memfd") && strcmp(mode, "tmpfile")) {
            free(c);
            rb_raise(farce_eError, "FARCE_CORE_COPY=%s: expected auto, memfd or tmpfile", mode);
        }
        r = OPEN_REFUSED;
        if (memfd) r = try_memfd(c, &why, broken, sizeof(broken));
        if (r == OPEN_REFUSED && dirs) r = try_directories(c, &why, broken, sizeof(broken));
        if (r == OPEN_REFUSED) {
            char message[sizeof(why.text) + 1024];
            snprintf(message, sizeof(message),
                     "farce cannot start its Go core in this forked child (pid %d, fork generation %llu): "
                     "the parent had started its own, which a child can never use, and loading a fresh copy of "
                     "%s was refused everywhere it was tried (FARCE_CORE_COPY=%s). Tried: %s. To fix: allow "
                     "executable memfds (sysctl vm.memfd_noexec=0, or a seccomp policy that permits "
                     "memfd_create), or set FARCE_CORE_COPY_DIRS to a directory this process can write on a "
                     "filesystem mounted with exec; or create farce schedulers only after fork "
                     "(require farce in the master, run reactors in the workers)",
                     (int)getpid(), (unsigned long long)farce_fork_generation, c->source, mode, why.text);
            free(c);
            raise_failure(message);
        }
    }
    if (r == OPEN_BROKEN) {
        /* A library we cannot use; if its runtime started it stays mapped. */
        free(c);
        raise_failure(broken);
    }
    c->load_seconds = seconds_since(&t0);
    current = c;
    return c->calls;
}

/* call-seq: Farce.core_info -> Hash
 * Which copy of the Go core this process calls, and since when. */
static VALUE core_info(VALUE mod)
{
    VALUE h = rb_hash_new();
#define SET(key, value) rb_hash_aset(h, ID2SYM(rb_intern(key)), (value))
    SET("loaded", current ? Qtrue : Qfalse);
    SET("fork_generation", ULL2NUM(farce_fork_generation));
    SET("runtimes_mapped", INT2NUM(runtimes_mapped));
    if (current) {
        SET("kind", ID2SYM(rb_intern(current->kind)));
        SET("library", rb_str_new_cstr(current->source));
        SET("mapped_as", rb_str_new_cstr(current->mapped));
        SET("shared_with_siblings", current->shared ? Qtrue : Qfalse);
        SET("generation", ULL2NUM(current->generation));
        SET("pid", INT2NUM(current->pid));
        SET("loaded_at", rb_time_nano_new(current->loaded_at.tv_sec, current->loaded_at.tv_nsec));
        SET("load_seconds", DBL2NUM(current->load_seconds));
        SET("abi", LL2NUM(current->abi));
    }
    if (failure && failure_generation == farce_fork_generation) SET("last_failure", rb_str_new_cstr(failure));
#undef SET
    return h;
}
