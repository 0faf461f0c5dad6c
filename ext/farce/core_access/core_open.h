/*
 * Opening one file of the Go core and starting its runtime; see core_open.c.
 * For the loader (core_loader.c), the copies (core_copy.c) and core_info.c.
 */
#ifndef FARCE_CORE_OPEN_H
#define FARCE_CORE_OPEN_H 1

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>
#include "core_access/core_door.h"

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

/* ---- reasons, collected while trying places ------------------------------ */

struct reasons {
    char text[4096];
    size_t len;
};

/* Appends a new reason (separated by "; "). */
void farce_reason_add(struct reasons *r, const char *fmt, ...);
/* Appends to the last reason. */
void farce_reason_more(struct reasons *r, const char *fmt, ...);

/* ---- dlopen with the runtime's start under our signal mask --------------- */

enum open_result { OPENED, OPEN_REFUSED, OPEN_BROKEN };

/* Opens `file` and starts its runtime. OPEN_REFUSED: dlopen failed (another
 * place may work; the reason is added). OPEN_BROKEN: the library is not one
 * this extension can use (message in broken). */
enum open_result farce_open_core(struct core_copy *c, const char *file, struct reasons *why, char *broken, size_t blen);

/* Go runtimes mapped here: inherited ones plus our own. */
int farce_runtimes_mapped(void);

#endif
