//go:build linux

/*
 * A per-thread cache of the calling thread's stack bounds, linked into the
 * Go core with -Wl,--wrap=pthread_getattr_np.
 *
 * Why: on every call into Go from a stack it has not seen (every Ruby fiber
 * has its own), the Go runtime asks pthread_getattr_np for the thread's stack
 * bounds. For the main thread glibc answers by parsing /proc/self/maps,
 * which made each call from a fiber cost 128 µs to 1.8 ms. The bounds of a
 * thread's own stack never change, so the first answer is kept.
 */
#define _GNU_SOURCE
#include <pthread.h>

int __real_pthread_getattr_np(pthread_t thread, pthread_attr_t *attr);

static __thread int cached;
static __thread void *cached_addr;
static __thread size_t cached_size;

int __wrap_pthread_getattr_np(pthread_t thread, pthread_attr_t *attr)
{
    if (!pthread_equal(thread, pthread_self())) {
        return __real_pthread_getattr_np(thread, attr);
    }
    if (!cached) {
        int err = __real_pthread_getattr_np(thread, attr);
        if (err != 0) return err;
        if (pthread_attr_getstack(attr, &cached_addr, &cached_size) == 0) {
            cached = 1;
        }
        return 0;
    }
    int err = pthread_attr_init(attr);
    if (err != 0) return err;
    return pthread_attr_setstack(attr, cached_addr, cached_size);
}
