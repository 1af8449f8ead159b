#ifndef MALLOC_COUNTER_H
#define MALLOC_COUNTER_H

/// The number of allocation calls (malloc, calloc, realloc, posix_memalign, aligned_alloc,
/// memalign) made by the process so far.
unsigned long long malloc_counter_allocations(void);

#endif
