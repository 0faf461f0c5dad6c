/*
 * Turns (farce_turns, embedded in the loop as farce_loop.turns): when the
 * loop resumed the running fiber, and the budget after which that fiber
 * gives the loop a turn at its next hook that would not block. The loop
 * does the giving (event_loop.h: farce_loop_turn_check and friends, and
 * farce_loop_give_turn for the measurements behind the default budget).
 */
#ifndef FARCE_TURNS_H
#define FARCE_TURNS_H 1

#include <stdint.h>
#include "platforms/clock.h"

/* The turn budget when none is given: see farce_loop_give_turn for the measurements. */
#define FARCE_DEFAULT_TURN_BUDGET_NS 500000LL

typedef struct farce_turns {
    int64_t started_ns; /* CLOCK_MONOTONIC when the loop resumed the running fiber */
    int64_t budget_ns;  /* 0: no budget */
    long given;         /* turns given because the budget ran out (stats) */
    int owed;           /* a transfer found the budget spent: the next hook gives the turn first */
} farce_turns;

/* A new turn starts at now. */
static inline void farce_turns_begin(farce_turns *t, int64_t now)
{
    t->started_ns = now;
    t->owed = 0;
}

/* Whether the running fiber has held the loop past the budget (reads the
 * clock only when there is a budget). */
static inline int farce_turns_spent(const farce_turns *t)
{
    return t->budget_ns > 0 && farce_monotonic_ns() - t->started_ns >= t->budget_ns;
}

#endif
