/*
 * Farce.core_info; see core_info.c.
 */
#ifndef FARCE_CORE_INFO_H
#define FARCE_CORE_INFO_H 1

/* Defines Farce.core_info; called once from Init. */
void farce_core_info_init(void);

#endif
