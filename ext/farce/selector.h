//go:build ignore

/*
 * Farce::IOEventSelector (selector.c): an io-event selector backed by the Go
 * core. lib/farce/io_event.rb publishes it as IO::Event::Selector::Farce.
 */
#ifndef FARCE_SELECTOR_H
#define FARCE_SELECTOR_H 1

#include <ruby.h>

void farce_selector_init(VALUE mFarce);

#endif
