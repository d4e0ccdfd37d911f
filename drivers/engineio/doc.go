// Package engineio holds the shapes of the engine's statements: the
// parameters each binds (…Params, by bind tag) and the rows each returns
// (…Row, by column name). drivers.Statements pairs them with each dialect's
// text, and drivers.Build checks every text against them. The types are
// plain data with no behaviour of their own beyond scanning a time, so this
// package imports nothing of loanq: drivers (the SPI and the statement
// compiler), the drivers of each database and the engine (dispatch) all
// depend on it, and it on none of them. A feature outside the engine keeps
// its params and rows beside its own catalogue, as namedlock and dashboard
// do.
package engineio
