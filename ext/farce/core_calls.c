/*
 * Errors of core calls as Ruby exceptions; see core_calls.h.
 */
#include "core_calls.h"

void farce_raise_core_error(const struct farce_core_api *core, int64_t handle, int64_t code, const char *what, VALUE backend)
{
    char msg[512] = "";
    if (handle) core->last_error(handle, msg, sizeof(msg));
    if (code == -FARCE_E_HANDLE) rb_raise(farce_eError, "%s: the scheduler is closed", what);
    if (code == -FARCE_E_ARGUMENT) rb_raise(rb_eArgError, "%s: %s", what, msg);
    if (code < 0 && code > -4096) {
        rb_syserr_fail_str((int)-code, rb_sprintf("%s (farce %"PRIsVALUE" backend): %s", what, backend, msg));
    }
    rb_raise(farce_eError, "%s failed (code %lld): %s", what, (long long)code, msg);
}
