/*
 * Stall detection's signal on Linux (stall.h): a real-time signal that
 * neither Ruby nor Go uses, sent to the loop's thread (tgkill), whose
 * handler only registers the postponed job.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <ruby.h>
#include <ruby/debug.h>
#include "loop/stall.h"

int farce_stall_signal(void) { return SIGRTMIN + 7; }

int64_t farce_stall_thread_id(void) { return (int64_t)syscall(SYS_gettid); }

#ifdef POSTPONED_JOB_HANDLE_INVALID /* Ruby 3.3+: preregistered, triggered from the handler */
static rb_postponed_job_handle_t job_handle = POSTPONED_JOB_HANDLE_INVALID;
static void on_signal(int sig, siginfo_t *info, void *ctx)
{
    if (job_handle != POSTPONED_JOB_HANDLE_INVALID) rb_postponed_job_trigger(job_handle);
}
static int register_job(void (*job)(void *))
{
    job_handle = rb_postponed_job_preregister(0, job, NULL);
    return job_handle == POSTPONED_JOB_HANDLE_INVALID ? -1 : 0;
}
#else
static void (*the_job)(void *);
static void on_signal(int sig, siginfo_t *info, void *ctx)
{
    rb_postponed_job_register_one(0, the_job, NULL);
}
static int register_job(void (*job)(void *))
{
    the_job = job;
    return 0;
}
#endif

int farce_stall_install_handler(void (*job)(void *))
{
    static int installed;
    if (installed) return 0;
    if (register_job(job) != 0) return -1;
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    if (sigaction(farce_stall_signal(), &sa, NULL) != 0) return -1;
    installed = 1;
    return 0;
}
