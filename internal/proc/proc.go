// Package proc tells whether a process of this host is gone, so that a lease
// held by a crashed loanq on the same host can be taken over at once instead
// of after its TTL (docs/algorithm.md, "Lease heartbeat and dead holders").
package proc

import (
	"os"
	"strconv"
	"strings"
)

// Holder is a lease holder id: host:pid:nonce (dispatch.New writes it).
type Holder struct {
	Host string
	PID  int
}

// ParseHolder reads a holder id; ok is false for anything else.
func ParseHolder(id string) (Holder, bool) {
	parts := strings.Split(id, ":")
	if len(parts) < 3 {
		return Holder{}, false
	}
	pid, err := strconv.Atoi(parts[len(parts)-2])
	if err != nil || pid <= 0 {
		return Holder{}, false
	}
	return Holder{Host: strings.Join(parts[:len(parts)-2], ":"), PID: pid}, true
}

// DeadOnThisHost reports whether holder id names a process of this host
// (same host name) that no longer runs. Unknown ids, other hosts, this very
// process and systems where it cannot tell all answer false: the lease then
// ends with its TTL, as before. Host names must be unique among the nodes
// sharing a database for this to be safe (two containers with one host name
// and separate PID namespaces are not).
func DeadOnThisHost(id string) bool {
	h, ok := ParseHolder(id)
	if !ok || h.PID == os.Getpid() {
		return false
	}
	host, err := os.Hostname()
	if err != nil || host != h.Host {
		return false
	}
	return gone(h.PID)
}
