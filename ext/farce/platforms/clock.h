/*
 * The monotonic clock the loop, its turns, stall reports and the op keeper
 * read (one definition, inline: a turn check reads it on every hook).
 */
#ifndef FARCE_CLOCK_H
#define FARCE_CLOCK_H 1

#include <stdint.h>
#include <time.h>

#ifdef _WIN32
#include <winsock2.h> /* before windows.h, as ruby/win32.h includes them */
#include <windows.h>
/* QueryPerformanceCounter in nanoseconds, converted as the Go core's
 * clock_windows.go converts it: both sides stamp with the same clock. */
static inline int64_t farce_monotonic_ns(void)
{
    /* the same answer whichever thread (of any Ractor) asks first: relaxed
     * atomics, which compile to the plain load and store */
    static int64_t known_frequency;
    int64_t frequency = __atomic_load_n(&known_frequency, __ATOMIC_RELAXED);
    LARGE_INTEGER c;
    if (!frequency) {
        LARGE_INTEGER f;
        QueryPerformanceFrequency(&f);
        frequency = f.QuadPart;
        __atomic_store_n(&known_frequency, frequency, __ATOMIC_RELAXED);
    }
    QueryPerformanceCounter(&c);
    return c.QuadPart / frequency * 1000000000LL + c.QuadPart % frequency * 1000000000LL / frequency;
}
#else
static inline int64_t farce_monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}
#endif

#endif
