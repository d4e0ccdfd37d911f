package mysql

// DataLocksSQL is the statement `loanq explain` reads MySQL 8's InnoDB locks
// with, for its exact-text test.
const DataLocksSQL = dataLocks
