/*
 * The monotonic clock the loop, its turns, stall reports and the op keeper
 * read (one definition, inline: a turn check reads it on every hook).
 */
#ifndef FARCE_CLOCK_H
#define FARCE_CLOCK_H 1

#include <stdint.h>
#include <time.h>

static inline int64_t farce_monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

#endif
