// Command cli-phases shows where one loanq call's time goes, phase by phase,
// with the round trips of each: it runs a command N times, one after the
// other, with its database connections going through a TCP proxy that
// records every round trip (a burst the client sends, then the server's
// answer) with its time and the statement it carried, and names each
// round trip's phase from loanq's statements (connect, schema check,
// identity, task read, request log, the round from BEGIN to COMMIT, what
// follows it). A phase's time runs from the end of the previous round trip
// to the end of its own: the client's work before a statement counts with
// it. "start" is the time from the process's start to its first
// connection (exec, Go's start, loanq's init, parsing the DSN), "exit" the
// time after the last answer. BENCHMARKS.md ("A command-line work get,
// phase by phase") has the figures.
//
//	go run ./scripts/cli-phases --target 127.0.0.1:5432 --listen 127.0.0.1:15432 -n 40 -- \
//	    env LOANQ_USER=ann ./loanq --db 'postgres://postgres@127.0.0.1:15432/db?sslmode=disable' work get T
//	go run ./scripts/cli-phases --proto mysql --target 127.0.0.1:3306 --listen 127.0.0.1:13306 -n 40 -- \
//	    env LOANQ_USER=ann ./loanq --db 'mysql://root@127.0.0.1:13306/db' work get T
//
// With --serve D it only proxies for D and then reports per connection
// kind (a work get's connection is the one that logs a request): the
// phases of the connections of many processes at once, such as those of
// `loanq --db PROXIED bench --target cli --processes 32` (its lock-free
// phase's connections are "other"). The proxy costs each round trip a few
// tens of microseconds: compare builds through it, not with runs without it.
//
// The statement shown is the first of a burst (PostgreSQL: Parse or Query;
// MySQL: COM_QUERY, COM_STMT_PREPARE, or the statement a COM_STMT_EXECUTE
// runs). TLS hides them: use sslmode=disable.
package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:15432", "the proxy's address, which the command's DSN must name")
	target := flag.String("target", "127.0.0.1:5432", "the database server's address")
	proto := flag.String("proto", "pg", "the wire protocol: pg or mysql")
	n := flag.Int("n", 20, "runs of the command")
	timeline := flag.Bool("timeline", false, "also print the last run's round trips")
	serve := flag.Duration("serve", 0, "only proxy for this long, then report per connection kind")
	flag.Parse()
	if *proto != "pg" && *proto != "mysql" {
		fail("--proto %q: give pg or mysql", *proto)
	}
	if *serve == 0 && flag.NArg() == 0 {
		fail("give the command to run after --, or --serve D")
	}
	p := &proxy{target: *target, proto: *proto}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fail("%v", err)
	}
	go p.accept(ln)
	var out any
	if *serve > 0 {
		time.Sleep(*serve)
		out = p.perConnection()
	} else {
		out = p.runs(flag.Args(), *n, *timeline)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	_ = enc.Encode(out)
}

func fail(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "cli-phases: "+format+"\n", a...)
	os.Exit(2)
}

// event is one read on a connection: what the client sent (c2s) or the
// server answered, or the connection's accept or close.
type event struct {
	conn  int
	c2s   bool
	t     time.Time
	label string // the statement a client burst carries; "accept", "close"
	seq   int    // MySQL: the sequence id of the burst's first packet
}

type proxy struct {
	target, proto string

	mu     sync.Mutex
	events []event
	conns  int

	prepared sync.Map // MySQL "conn:statement id" → statement text
	pending  sync.Map // MySQL conn → the text of its COM_STMT_PREPARE in flight
}

func (p *proxy) record(e event) {
	p.mu.Lock()
	p.events = append(p.events, e)
	p.mu.Unlock()
}

// take returns the events recorded so far, in time order, and forgets them.
func (p *proxy) take() []event {
	p.mu.Lock()
	evs := p.events
	p.events = nil
	p.mu.Unlock()
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].t.Before(evs[j].t) })
	return evs
}

func (p *proxy) accept(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go p.relay(c)
	}
}

// relay copies one client connection to the server and back, recording
// each read.
func (p *proxy) relay(c net.Conn) {
	defer c.Close()
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	defer s.Close()
	p.mu.Lock()
	p.conns++
	id := p.conns
	p.mu.Unlock()
	p.record(event{conn: id, t: time.Now(), label: "accept"})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // client → server
		defer wg.Done()
		buf := make([]byte, 1<<16)
		first := true
		for {
			n, err := c.Read(buf)
			if n > 0 {
				e := event{conn: id, c2s: true, t: time.Now()}
				if p.proto == "pg" {
					e.label = pgLabel(buf[:n], first)
				} else {
					e.label, e.seq = p.mysqlLabel(id, buf[:n])
				}
				first = false
				p.record(e)
				if _, err := s.Write(buf[:n]); err != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		s.(*net.TCPConn).CloseWrite()
	}()
	go func() { // server → client
		defer wg.Done()
		buf := make([]byte, 1<<16)
		for {
			n, err := s.Read(buf)
			if n > 0 {
				if p.proto == "mysql" && n >= 9 && buf[4] == 0x00 { // COM_STMT_PREPARE_OK: its statement id
					if text, ok := p.pending.LoadAndDelete(id); ok {
						p.prepared.Store(fmt.Sprintf("%d:%d", id, binary.LittleEndian.Uint32(buf[5:9])), text)
					}
				}
				p.record(event{conn: id, t: time.Now()})
				if _, err := c.Write(buf[:n]); err != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		c.(*net.TCPConn).CloseWrite()
	}()
	wg.Wait()
	p.record(event{conn: id, t: time.Now(), label: "close"})
}

// pgLabel names a PostgreSQL client burst: its message types and the
// statement of its first Parse or Query.
func pgLabel(b []byte, first bool) string {
	if first {
		if len(b) >= 8 && binary.BigEndian.Uint32(b[4:8]) == 80877103 {
			return "SSLRequest"
		}
		return "startup"
	}
	var types strings.Builder
	text := ""
	for len(b) >= 5 {
		t := b[0]
		n := int(binary.BigEndian.Uint32(b[1:5]))
		types.WriteByte(t)
		body := b[5:]
		if n-4 <= len(body) && n >= 4 {
			body = body[:n-4]
		}
		if text == "" {
			switch t {
			case 'Q':
				text = string(bytes.TrimRight(body, "\x00"))
			case 'P': // statement name, then the text
				if i := bytes.IndexByte(body, 0); i >= 0 {
					if j := bytes.IndexByte(body[i+1:], 0); j >= 0 {
						text = string(body[i+1 : i+1+j])
					}
				}
			case 'p':
				text = "(password)"
			}
		}
		if n < 4 || n+1 > len(b) {
			break
		}
		b = b[n+1:]
	}
	return types.String() + " " + oneLine(text)
}

// mysqlLabel names a MySQL client burst by its command; a packet with a
// sequence id other than 0 belongs to the handshake.
func (p *proxy) mysqlLabel(conn int, b []byte) (string, int) {
	if len(b) < 5 {
		return "?", -1
	}
	if seq := int(b[3]); seq != 0 {
		return "handshake", seq
	}
	body := b[5:]
	switch b[4] {
	case 0x03:
		return "QUERY " + oneLine(string(body)), 0
	case 0x16:
		p.pending.Store(conn, oneLine(string(body)))
		return "PREPARE " + oneLine(string(body)), 0
	case 0x17:
		if len(body) >= 4 {
			if t, ok := p.prepared.Load(fmt.Sprintf("%d:%d", conn, binary.LittleEndian.Uint32(body))); ok {
				return "EXECUTE " + t.(string), 0
			}
		}
		return "EXECUTE", 0
	case 0x19:
		return "STMT_CLOSE", 0
	case 0x01:
		return "QUIT", 0
	case 0x0e:
		return "PING", 0
	}
	return fmt.Sprintf("command 0x%02x", b[4]), 0
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 160 {
		s = s[:160] + "…"
	}
	return s
}

// phases name a round trip by the statement it carries, first match first;
// any other statement is the round's until its COMMIT, and "after the
// commit" once it has committed.
var phases = []struct {
	name string
	re   *regexp.Regexp
}{
	{"wait for the holder", regexp.MustCompile(`FOR SHARE|lock_timeout|LOCK IN SHARE MODE|innodb_lock_wait_timeout`)},
	{"pooler check", regexp.MustCompile(`pg_backend_pid`)},
	{"ping", regexp.MustCompile(`-- ping|^PING`)},
	{"session settings", regexp.MustCompile(`SET time_zone|SET SESSION .*DEFAULT`)},
	{"schema check", regexp.MustCompile(`loanq_schema_version`)},
	{"identity", regexp.MustCompile(`loanq_may_act_as`)},
	{"task read", regexp.MustCompile(`source_table, key_column`)},
	{"request log", regexp.MustCompile(`INSERT INTO loanq_work_request`)},
}

var commit = regexp.MustCompile(`(?i)^(Q |QUERY )commit`)

// trip is one round trip: from the client's burst to the last answer
// before the client's next burst.
type trip struct {
	start, end time.Time
	label      string
	phase      string
}

// trips turns one connection's events into round trips with their phases.
func trips(evs []event, proto string) []trip {
	var out []trip
	var cur *trip
	lastWasClient, committed := false, false
	lastPhase := ""
	for _, e := range evs {
		switch {
		case e.label == "accept" || e.label == "close":
			continue
		case e.c2s && cur != nil && lastWasClient: // the same burst, read in parts
			cur.end = e.t
			continue
		case e.c2s:
			if cur != nil {
				out = append(out, *cur)
			}
			cur = &trip{start: e.t, end: e.t, label: e.label, phase: phaseOf(e, proto, lastPhase, committed)}
			if commit.MatchString(e.label) {
				committed = true
			}
			lastPhase = cur.phase
			lastWasClient = true
		default:
			if cur == nil { // MySQL: the server speaks first
				cur = &trip{start: e.t, label: "greeting", phase: "connect"}
			}
			cur.end = e.t
			lastWasClient = false
		}
	}
	if cur != nil {
		out = append(out, *cur)
	}
	return out
}

func phaseOf(e event, proto, last string, committed bool) string {
	l := e.label
	switch {
	case proto == "pg" && (strings.HasPrefix(l, "startup") || strings.HasPrefix(l, "SSLRequest") || strings.HasPrefix(l, "p ")):
		return "connect"
	case proto == "mysql" && l == "handshake":
		return "connect"
	case strings.HasPrefix(l, "X") || l == "QUIT":
		return "close"
	case proto == "pg" && strings.HasPrefix(l, "B") && strings.TrimSpace(l[strings.Index(l, " "):]) == "":
		return last // the execution of the statement just prepared
	}
	for _, p := range phases {
		if p.re.MatchString(l) {
			return p.name
		}
	}
	if committed {
		return "after the commit"
	}
	return "round (BEGIN … COMMIT)"
}

// attribute gives each phase the time from the end of the previous round
// trip (from `from` for the first) to the end of its own, and counts its
// round trips; it returns where the last one ended.
func attribute(ts []trip, from, until time.Time, ms map[string]float64, n map[string]float64) time.Time {
	prev := from
	for _, t := range ts {
		if t.phase == "close" {
			continue
		}
		end := t.end
		if !until.IsZero() && end.After(until) {
			end = until
		}
		if end.After(prev) {
			ms[t.phase] += millis(end.Sub(prev))
			prev = end
		}
		n[t.phase]++
	}
	return prev
}

// runs runs the command n times and reports the medians of each phase.
func (p *proxy) runs(command []string, n int, timeline bool) any {
	perPhase := map[string][]float64{}
	perTrips := map[string][]float64{}
	var walls, conns []float64
	var last []string
	for i := 0; i < n; i++ {
		p.take()
		cmd := exec.Command(command[0], command[1:]...)
		cmd.Stdout = io.Discard
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		t0 := time.Now()
		err := cmd.Run()
		t1 := time.Now()
		if ee, ok := err.(*exec.ExitError); err != nil && !(ok && ee.ExitCode() == 75) {
			fail("run %d: %v: %s", i+1, err, stderr.String())
		}
		time.Sleep(20 * time.Millisecond) // the proxy sees the close after the process ends
		evs := p.take()
		byConn := map[int][]event{}
		var order []int
		first := time.Time{}
		for _, e := range evs {
			if _, ok := byConn[e.conn]; !ok {
				order = append(order, e.conn)
			}
			byConn[e.conn] = append(byConn[e.conn], e)
			if e.label == "accept" && first.IsZero() {
				first = e.t
			}
		}
		var all []trip
		for _, c := range order {
			all = append(all, trips(byConn[c], p.proto)...)
		}
		sort.SliceStable(all, func(i, j int) bool { return all[i].start.Before(all[j].start) })
		ms, cnt := map[string]float64{}, map[string]float64{}
		from := t0
		if !first.IsZero() {
			ms["start"] = millis(first.Sub(t0))
			from = first
		}
		end := attribute(all, from, t1, ms, cnt)
		ms["exit"] = millis(t1.Sub(end))
		for k := range perPhase { // a phase this run did not have: 0
			if _, ok := ms[k]; !ok {
				ms[k] = 0
			}
		}
		for k, v := range ms {
			perPhase[k] = append(zeros(perPhase[k], i), v)
			perTrips[k] = append(zeros(perTrips[k], i), cnt[k])
		}
		walls = append(walls, millis(t1.Sub(t0)))
		conns = append(conns, float64(len(order)))
		if timeline && i == n-1 {
			for _, t := range all {
				last = append(last, fmt.Sprintf("%7.2f %6.2f ms  %-24s %s", millis(t.start.Sub(t0)), millis(t.end.Sub(t.start)), t.phase, t.label))
			}
		}
	}
	return map[string]any{
		"runs": n, "wall_p50_ms": median(walls), "connections_p50": median(conns),
		"phase_p50_ms": medians(perPhase), "round_trips_p50": medians(perTrips), "timeline_last_run": last,
	}
}

// perConnection reports, per kind of connection, the medians and means of
// each phase over the connections that opened and closed while it served.
func (p *proxy) perConnection() any {
	byConn := map[int][]event{}
	for _, e := range p.take() {
		byConn[e.conn] = append(byConn[e.conn], e)
	}
	type kind struct {
		life          []float64
		phases, trips map[string][]float64
	}
	kinds := map[string]*kind{}
	for _, evs := range byConn {
		if evs[0].label != "accept" || evs[len(evs)-1].label != "close" {
			continue // cut by the window
		}
		ts := trips(evs, p.proto)
		name := "other"
		for _, t := range ts {
			if t.phase == "request log" {
				name = "work get"
				break
			}
			if strings.Contains(t.label, "disposition") {
				name = "disposition"
			}
		}
		k := kinds[name]
		if k == nil {
			k = &kind{phases: map[string][]float64{}, trips: map[string][]float64{}}
			kinds[name] = k
		}
		i := len(k.life)
		k.life = append(k.life, millis(evs[len(evs)-1].t.Sub(evs[0].t)))
		ms, cnt := map[string]float64{}, map[string]float64{}
		attribute(ts, evs[0].t, time.Time{}, ms, cnt)
		for ph := range k.phases {
			if _, ok := ms[ph]; !ok {
				ms[ph] = 0
			}
		}
		for ph, v := range ms {
			k.phases[ph] = append(zeros(k.phases[ph], i), v)
			k.trips[ph] = append(zeros(k.trips[ph], i), cnt[ph])
		}
	}
	out := map[string]any{}
	for name, k := range kinds {
		means := map[string]float64{}
		for ph, v := range k.phases {
			s := 0.0
			for _, x := range v {
				s += x
			}
			means[ph] = s / float64(len(v))
		}
		out[name] = map[string]any{"connections": len(k.life), "life_p50_ms": median(k.life),
			"phase_p50_ms": medians(k.phases), "phase_mean_ms": means, "round_trips_p50": medians(k.trips)}
	}
	return out
}

// zeros pads v with zeros to n values: a phase first seen in run n+1.
func zeros(v []float64, n int) []float64 {
	for len(v) < n {
		v = append(v, 0)
	}
	return v
}

func millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func medians(m map[string][]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range m {
		out[k] = median(v)
	}
	return out
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[len(s)/2]
}
