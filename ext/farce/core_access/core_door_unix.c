/*
 * The door into the Go core on Linux (core_door.h): the library's functions
 * are called as they are, on the caller's stack (docs/cgo-hazards.md rule
 * 5), and the loop is woken through its wake descriptor.
 */
#include <dlfcn.h>
#include <unistd.h>
#include "core_access/core_door.h"

void *farce_core_symbol(void *dl, const char *symbol) { return dlsym(dl, symbol); }

const char *farce_core_resolve_platform(void *dl) { return NULL; }

void farce_write_wake(void *p)
{
    uint64_t one = 1;
    ssize_t unused = write(*(int *)p, &one, sizeof(one));
    (void)unused;
}
