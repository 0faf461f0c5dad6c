/*
 * Farce::IOEventSelector (io_event_selector.c): an io-event selector over the
 * loop. lib/farce/io_event.rb publishes it as IO::Event::Selector::Farce.
 */
#ifndef FARCE_IO_EVENT_SELECTOR_H
#define FARCE_IO_EVENT_SELECTOR_H 1

#include <ruby.h>

void farce_io_event_selector_init(VALUE mFarce);

#endif
