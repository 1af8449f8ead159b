#include "malloc_stats.h"

#if defined(__linux__)
#include <malloc.h>
#endif

size_t malloc_stats_in_use(void) {
#if defined(__GLIBC__)
    struct mallinfo2 info = mallinfo2();
    return info.uordblks + info.hblkhd;
#else
    return 0;
#endif
}
