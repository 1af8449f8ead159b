#ifndef CSQLITE_SHIM_H
#define CSQLITE_SHIM_H

#include <sqlite3.h>

/// SQLITE_TRANSIENT, which Swift cannot import (a cast of -1 to a function pointer): SQLite
/// copies the bound bytes before the bind call returns.
static inline sqlite3_destructor_type csqlite_transient(void) {
    return SQLITE_TRANSIENT;
}

/// Turns off SQLite's memory statistics, which take a process-wide mutex around every
/// allocation SQLite makes. Only before SQLite is initialized (by the first connection opened);
/// later it returns SQLITE_MISUSE and changes nothing. `sqlite3_config` is variadic, which Swift
/// cannot call.
static inline int csqlite_disable_memory_statistics(void) {
    return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}

#endif
