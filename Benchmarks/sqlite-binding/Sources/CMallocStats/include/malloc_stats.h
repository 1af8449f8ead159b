#ifndef MALLOC_STATS_H
#define MALLOC_STATS_H

#include <stddef.h>

/// Bytes currently allocated through malloc (glibc: in-use ordinary plus mmapped blocks), 0 elsewhere.
size_t malloc_stats_in_use(void);

#endif
