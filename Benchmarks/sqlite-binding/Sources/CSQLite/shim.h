#ifndef CSQLITE_SHIM_H
#define CSQLITE_SHIM_H

#include <sqlite3.h>

// SQLITE_STATIC and SQLITE_TRANSIENT are casts of integers to function pointers, which Swift does
// not import; these wrappers give the two binding modes a callable name.

/// Binds text that SQLite copies at once (the Swift string need not outlive the call).
static inline int csqlite_bind_text_transient(sqlite3_stmt *stmt, int index, const char *text, int length) {
    return sqlite3_bind_text(stmt, index, text, length, SQLITE_TRANSIENT);
}

/// Binds a blob without copying: the bytes must stay valid until the statement is stepped and
/// reset (or rebound).
static inline int csqlite_bind_blob_static(sqlite3_stmt *stmt, int index, const void *bytes, int length) {
    return sqlite3_bind_blob(stmt, index, bytes, length, SQLITE_STATIC);
}

#endif
