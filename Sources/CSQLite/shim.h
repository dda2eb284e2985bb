// SQLite, the embedded ledger's storage engine (Debian libsqlite3-dev).
#include <sqlite3.h>
