/*
 * Private copies of the Go core for a forked child (FARCE_CORE_COPY); see
 * core_copy.c.
 */
#ifndef FARCE_CORE_COPY_H
#define FARCE_CORE_COPY_H 1

#include <stdint.h>
#include "core_access/core_open.h"

/* The pthread_atfork prepare handler's part, in a process whose runtime
 * started (loaded from source): makes the one sealed memfd copy its children
 * share, named for their fork generation. */
void farce_copy_prepare_for_children(const char *source, uint64_t generation);
/* Opens the parent's shared memfd copy if there is one, else a memfd copy
 * of c->source of this process's own. */
enum open_result farce_copy_try_memfd(struct core_copy *c, struct reasons *why, char *broken, size_t blen);
/* Opens an unlinked copy of c->source in the first directory that allows it
 * (FARCE_CORE_COPY_DIRS, else $TMPDIR, /dev/shm, /tmp, /var/tmp, the
 * library's own directory). */
enum open_result farce_copy_try_directories(struct core_copy *c, struct reasons *why, char *broken, size_t blen);

#endif
