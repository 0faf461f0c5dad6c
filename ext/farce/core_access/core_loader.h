/*
 * Loading the Go core (libfarce_core.so) on first use; see core_loader.c.
 */
#ifndef FARCE_CORE_LOADER_H
#define FARCE_CORE_LOADER_H 1

#include <ruby.h>
#include "core_access/core_door.h"

extern VALUE farce_eError;

/* Incremented in every forked child: a scheduler remembers the value it was
 * created under and is inert when it differs. */
extern volatile uint64_t farce_fork_generation;

/* Loads the Go core if this process has none yet: the library itself in a
 * process where no Go runtime ever started, otherwise (a child of one that
 * started it) a fresh copy for this fork generation. Returns the copy this
 * process calls; it stays valid for the life of the process, so a front end
 * keeps the one it was started with and always calls the copy its handle
 * belongs to. Raises Farce::Error when it cannot, naming every place tried. */
const farce_core_copy *farce_core_load(void);
/* Raises the Farce::Error of the last failed load in this fork generation,
 * without trying again (a selector fails at creation, not at its first wait). */
void farce_core_check_usable(void);

/* Whether this process has loaded a core of its own. */
int farce_core_loaded(void);
/* The fork generation of the loaded core (UINT64_MAX when none). */
uint64_t farce_core_generation(void);
/* Installs the fork handlers; called once from Init. */
void farce_core_loader_init(void);

/* For Farce.core_info (core_info.c): the record of the copy this process
 * calls (NULL before its first load), and the failure of the last attempt
 * in this fork generation (NULL when none). */
struct core_copy;
const struct core_copy *farce_core_current(void);
const char *farce_core_last_failure(void);

#endif
