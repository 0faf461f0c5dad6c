/*
 * Loading the Go core (libfarce_core.so) on first use; see core_loader.c.
 */
#ifndef FARCE_CORE_LOADER_H
#define FARCE_CORE_LOADER_H 1

#include <ruby.h>
#include "core/farce_core.h"

/* The Go core's exported functions, resolved by farce_core_load(). */
struct farce_core_api {
    int64_t (*abi)(void);
    int64_t (*new_)(const char *backend, char *name, int name_len, char *reason, int reason_len, int *wake_fd);
    int64_t (*close)(int64_t h);
    void (*last_error)(int64_t h, char *buf, int len);
    int64_t (*wait_fd)(int64_t h, int fd, uint32_t events, int64_t timeout_ns, int known, uint64_t *token);
    int64_t (*park)(int64_t h, int64_t timeout_ns, uint64_t *token);
    int64_t (*yield)(int64_t h, uint64_t *token);
    /* optional (NULL in an older core): a yield behind the next poll's timers and events */
    int64_t (*yield_last)(int64_t h, uint64_t *token);
    /* optional (NULL in an older core): farce_poll taking the last batch's resume stamps */
    int64_t (*poll_noting)(int64_t h, int64_t block_ns, farce_completion *out, int capacity, int64_t *resumed,
                           int nresumed);
    /* optional (NULL in an older core): farce_poll_noting that also starts
     * descriptor waits parked on reserved tokens, and the same start alone */
    int64_t (*poll_batch)(int64_t h, int64_t block_ns, farce_completion *out, int capacity, farce_poll_args *args);
    int64_t (*bind_waits)(int64_t h, farce_fd_wait *waits, int n);
    /* optional (NULL in an older core): the stall watchdog (stall.c) */
    int64_t (*stall_watch)(int64_t h, farce_turn_state *state, int64_t threshold_ns, int signo);
    int64_t (*wake)(int64_t h, uint64_t token);
    int64_t (*cancel)(int64_t h, uint64_t token);
    int64_t (*forget_fd)(int64_t h, int fd);
    int64_t (*poll)(int64_t h, int64_t block_ns, farce_completion *out, int capacity);
    int64_t (*stats)(int64_t h, int64_t *out, int n);
    /* optional (NULL in a core that predates them) */
    int64_t (*backends)(char *buf, int len);
    int64_t (*probe)(int fd, uint32_t events);
    /* optional (NULL when the core lacks them): completion operations */
    int64_t (*ops_supported)(int64_t h);
    int64_t (*submit_op)(int64_t h, int kind, int fd, uint64_t ptr, uint64_t len, int64_t offset, uint64_t *token);
    int64_t (*cancel_op)(int64_t h, uint64_t token);
    /* optional (NULL in a core that predates them): draining operations
     * before their memory is released (issue 13 item 4) */
    int64_t (*ops_in_flight)(int64_t h);
    int64_t (*drain_ops)(int64_t h, int64_t timeout_ns);
};

/* The table of the copy this process loaded (all zero before the first
 * load, and again in a forked child until it loads its own copy). */
extern struct farce_core_api farce_core;
extern VALUE farce_eError;

/* Incremented in every forked child: a scheduler remembers the value it was
 * created under and is inert when it differs. */
extern volatile uint64_t farce_fork_generation;

/* Loads the Go core if this process has none yet: the library itself in a
 * process where no Go runtime ever started, otherwise (a child of one that
 * started it) a fresh copy for this fork generation. Raises Farce::Error
 * when it cannot, naming every place tried. */
void farce_core_load(void);
/* Raises the Farce::Error of the last failed load in this fork generation,
 * without trying again (a selector fails at creation, not at its first wait). */
void farce_core_check_usable(void);

/* Whether this process has loaded a core of its own. */
int farce_core_loaded(void);
/* The fork generation of the loaded core (UINT64_MAX when none). */
uint64_t farce_core_generation(void);
/* The loaded copy's table (NULL when none). It stays valid for the life of
 * the process: a front end may keep the pointer it was created with, so that
 * it always calls the copy its handle belongs to. */
const struct farce_core_api *farce_core_current(void);
/* Installs the fork handler and defines Farce.core_info; called once from Init. */
void farce_core_loader_init(void);

#endif
