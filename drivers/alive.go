package drivers

import "time"

// RequestAlive is how long a pending request stays servable after its last
// sign of life (docs/algorithm.md, "Abandoned requests"). Every caller that
// waits for a request shows one every 15 s (dispatch's aliveEvery), and a
// recheck (`work status`, the API's GET) is one; a request with none for
// longer is never served: the statements that read or finish pending
// requests for a round check it themselves, against the database clock, and
// it ends as 'expired'. Three times the longest step of the command line's
// default recheck (5 s, 10 s, 20 s), and three missed signs of life of a
// waiter in a row.
//
// The statements write it as a literal (requestAliveMS), and so do the
// database's own checks in migration 00016 (PostgreSQL's row-level
// security policy, the MySQL/MariaDB and Oracle triggers): statements are
// fixed text. TestRequestAliveLiteral compares them.
const RequestAlive = 60 * time.Second

// requestAliveMS is RequestAlive in milliseconds, as statements write it:
// the statement vocabulary's {{requestAlive "col"}} ("the request whose
// alive_at column is col showed a sign of life within RequestAlive", by the
// database clock; NULL, a request logged by a version of loanq that shows
// none, is never alive) and {{requestStale "col"}}, its negation.
const requestAliveMS = "60000"
