/*
 * Windows: the stack every call into the Go core runs on (core_call_windows.c
 * says why). Only core_door.c calls this, through its FARCE_CORE_CALL.
 */
#ifndef FARCE_CORE_CALL_WINDOWS_H
#define FARCE_CORE_CALL_WINDOWS_H 1

/* Runs body(arg) on the calling thread's core call stack and returns when it
 * returns. Any thread may call it, with or without the GVL; body must not
 * switch fibers, raise or call Ruby. */
void farce_core_call_on_stack(void (*body)(void *), void *arg);

#endif
