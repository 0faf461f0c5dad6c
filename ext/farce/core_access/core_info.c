/*
 * What `Farce.core_info` reports: which copy of the Go core this process
 * calls (core_loader.c's record of it), since when, how it was loaded, and
 * the last failure of this fork generation.
 */
#include <ruby.h>
#include "core_access/core_info.h"
#include "core_access/core_loader.h"
#include "core_access/core_open.h"

/* call-seq: Farce.core_info -> Hash
 * Which copy of the Go core this process calls, and since when. */
static VALUE core_info(VALUE mod)
{
    const struct core_copy *current = farce_core_current();
    const char *failure = farce_core_last_failure();
    VALUE h = rb_hash_new();
#define SET(key, value) rb_hash_aset(h, ID2SYM(rb_intern(key)), (value))
    SET("loaded", current ? Qtrue : Qfalse);
    SET("fork_generation", ULL2NUM(farce_fork_generation));
    SET("runtimes_mapped", INT2NUM(farce_runtimes_mapped()));
    if (current) {
        SET("kind", ID2SYM(rb_intern(current->kind)));
        SET("library", rb_str_new_cstr(current->source));
        SET("mapped_as", rb_str_new_cstr(current->mapped));
        SET("shared_with_siblings", current->shared ? Qtrue : Qfalse);
        SET("generation", ULL2NUM(current->generation));
        SET("pid", INT2NUM(current->pid));
        SET("loaded_at", rb_time_nano_new(current->loaded_at.tv_sec, current->loaded_at.tv_nsec));
        SET("load_seconds", DBL2NUM(current->load_seconds));
        SET("abi", LL2NUM(current->abi));
    }
    if (failure) SET("last_failure", rb_str_new_cstr(failure));
#undef SET
    return h;
}

void farce_core_info_init(void)
{
    rb_define_singleton_method(rb_define_module("Farce"), "core_info", core_info, 0);
}
