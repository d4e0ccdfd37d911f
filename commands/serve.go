package commands

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/loanq/loanq/dashboard"
	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/internal/flagvalue"
	"github.com/loanq/loanq/internal/pause"
	"github.com/loanq/loanq/problem"
	"github.com/loanq/loanq/schema"
	"github.com/loanq/loanq/web"
)

func serveCommand() *cli.Command {
	return &cli.Command{
		Name:      "serve",
		Usage:     "serve a read-only dashboard page, Prometheus /metrics and /healthz",
		ArgsUsage: " ",
		Description: `Serves, until interrupted:
   /              the dashboard: per task, eligible loans at the last criteria run, pending
                  requests and the oldest one's age, active work, done today, criteria-run
                  durations; per processor, active work, oldest item, done today.
                  It refreshes itself every 3 seconds. With more than --max-tasks tasks
                  or processors it shows the busiest and says how many it left out.
   /tasks/NAME    one task: its definition, latest criteria runs and dispositions
   /api/dashboard the dashboard's figures as JSON (gzipped when the client accepts it)
   /metrics       Prometheus text exposition (loanq_… metrics, every task)
   /healthz       the state of the latest refresh: 200 {"status":"ok",…} when it read
                  the database, 503 otherwise; it never opens a connection itself

Read-only (unless --refill): it never writes to the database. Its figures come from
loanq's own tables, read by one refresh at a time and cached for --cache, so any
number of viewers and probes cost one refresh per interval, on at most --max-conns
connections in all. The backlog is the exception: every task's criteria run as a
COUNT over its source at start and every --backlog-every (1m), one task after
another. A dashboard account reads the sources only when granted them ("loanq
grants --role dashboard --source TABLE"); without, run it with --backlog-every 0s.

It listens on 127.0.0.1 unless --listen says otherwise. With a token (--token-file
PATH, or LOANQ_SERVE_TOKEN in the environment) every path but /healthz needs
"Authorization: Bearer TOKEN", or the session cookie (valid --session-ttl) set by
opening the page once as http://HOST:PORT/?token=TOKEN. A token on the command line
(--token) is refused (exit 2): every user of the machine sees a command line (ps).
Listening on any address other than loopback without a token is refused (exit 2)
unless --no-auth says so. It answers only to IP addresses, localhost and the names
in --allowed-hosts. See docs/dashboard.md.

Examples:
   loanq serve
   loanq --db postgres://app@db:5432/loans serve --listen 127.0.0.1:9180 --stale-after 4h
   loanq serve --listen 0.0.0.0:8080 --token-file /etc/loanq/serve-token --allowed-hosts dash.example.com
   LOANQ_SERVE_TOKEN="$(cat /etc/loanq/serve-token)" loanq serve --listen 0.0.0.0:8080 --metrics-per-user
   loanq serve --refill --refill-every 10s

--refill keeps candidate pools (task create … --prefetch N) above their low
mark from this process, as "loanq task refill --all --every D" would: one
refill per task at a time, under its lock or lease, whatever the number of
serve processes. The account then needs the refresher role (loanq grants).

--api also serves the JSON API under /api/v1/ (docs/api.md): processors without
database accounts ask for work, poll and cancel requests, dispose of loans and
list their pipeline over HTTP, authenticated by the API tokens of
` + "`loanq token create`" + ` (--auth token), or by a reverse proxy that names the user in
--user-header (--auth proxy; believed only from --trusted-proxy addresses;
members of --supervisor-group in --groups-header are supervisors). The
dashboard's token (--token-file) does not apply to /api/v1/. This process's database
account does the work as the caller's user, so it needs the serve role
(loanq grants). With --api, /work is the processor's page: sign in
with an API token (or through the --auth proxy), pick a task, Get Work,
dispose of the pipeline; its session cookie lasts --session-ttl and lives in
the database, so any serve node accepts it. With --api,
--max-conns defaults to 16: a caller waiting for its request may hold a
connection while it queues on the task's lock. /api/v1/openapi.json describes it.
   loanq serve --api --auth token --listen 0.0.0.0:8080 --token-file /etc/loanq/serve-token
   loanq serve --api --auth proxy --trusted-proxy 10.0.0.5 --groups-header X-Forwarded-Groups
   loanq serve --api --auth proxy --trusted-proxy 10.0.0.5 --groups-header X-Forwarded-Groups --supervisor-group leads --proxy-groups-header X-Forwarded-Groups`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "listen", Value: "127.0.0.1:8080", Usage: "`HOST:PORT` to listen on (port 0: any free port, printed at start)"},
			&cli.StringFlag{Name: "token-file", EnvVars: []string{"LOANQ_SERVE_TOKEN_FILE"}, Usage: "require the bearer token read from the file at `PATH` (its first line), or from LOANQ_SERVE_TOKEN in the environment; never on the command line, where ps shows it"},
			// Refused, not read: a command line is visible to every user of the
			// machine (ps). Kept as a hidden flag so that the refusal says
			// where the token goes instead of "flag provided but not defined".
			&cli.StringFlag{Name: "token", Hidden: true},
			&cli.BoolFlag{Name: "no-auth", Usage: "serve without a token on an address other than loopback: anyone who can reach it sees the queues"},
			&cli.StringSliceFlag{Name: "allowed-hosts", Usage: "host `NAME`s the server answers to, besides IP addresses and localhost (comma-separated or repeated; default: a name given in --listen, and this machine's host name when listening beyond loopback)"},
			&cli.StringFlag{Name: "session-ttl", Value: "12h", Usage: "how long a session cookie lasts: the dashboard's ?token= link, and a sign-in on /work with --api (`D`, 1m to 720h)"},
			&cli.IntFlag{Name: "max-conns", Value: 4, Usage: "open at most `N` database connections (1 to 100; with --api the default is 16)"},
			&cli.IntFlag{Name: "max-tasks", Value: web.DefaultMaxTasks, Usage: "show at most `N` tasks and N processors on the page and in /api/dashboard, the busiest (0: all)"},
			&cli.BoolFlag{Name: "metrics-per-user", Usage: "also export active work per task and user (one series per processor)"},
			&cli.StringFlag{Name: "stale-after", Value: "0s", Usage: "highlight active work held `D` or longer (e.g. 4h; 0s: no highlight)"},
			&cli.StringFlag{Name: "cache", Value: "2s", Usage: "serve the figures of one refresh for `D` (every viewer shares it)"},
			&cli.BoolFlag{Name: "refill", Usage: "also keep every prefetch task's candidate pool above its low mark (task refill --all, in this process; it then writes and runs criteria queries)"},
			&cli.StringFlag{Name: "refill-every", Value: "5s", Usage: "with --refill: look at the pools every `D`"},
			&cli.StringFlag{Name: "backlog-every", Value: "1m", Usage: "count every task's backlog (loans waiting) every `D` for the dashboard and /metrics; each count reads every eligible row (docs/scaling.md); 0s: never"},
			logFormatFlag(),
			&cli.BoolFlag{Name: "api", Usage: "also serve the JSON API under /api/v1/ for processors without database accounts (docs/api.md); it writes to the database"},
			&cli.StringFlag{Name: "auth", Value: "token", Usage: "with --api: how API callers authenticate, `MODE` one of: token (Authorization: Bearer TOKEN, issued by loanq token create) or proxy (a trusted reverse proxy names the user in --user-header)"},
			&cli.StringSliceFlag{Name: "trusted-proxy", Usage: "with --auth proxy: the reverse proxy's address or network (`CIDR`; comma-separated or repeated); the user header is honoured only from these"},
			&cli.StringFlag{Name: "user-header", Value: "X-Forwarded-User", Usage: "with --auth proxy: the header the proxy names the user in"},
			&cli.StringFlag{Name: "groups-header", Usage: "with --auth proxy: the header listing the user's groups, comma-separated (default: none, every user a processor)"},
			&cli.StringFlag{Name: "proxy-groups-header", Usage: "with --auth proxy: the header listing the user's loanq groups, comma-separated, kept as the user's memberships for tasks' --allow @GROUP (may be the --groups-header; default: none, groups only from loanq group add)"},
			&cli.StringFlag{Name: "supervisor-group", Value: "loanq-supervisors", Usage: "with --groups-header: the group whose members are supervisors"},
		},
		Action: serve,
	}
}

// serveConfig is serve's flags, checked.
type serveConfig struct {
	listen, token           string
	hold, ttl, session      time.Duration
	maxConns, maxTasks      int
	allowedHosts            []string
	loopback, noAuth, named bool
	// warnings are printed once the flags are known to be good.
	warnings []string

	api   bool           // --api: the JSON API and the processor's page
	auth  string         // --auth: token or proxy
	proxy *web.ProxyAuth // --auth proxy's trusted addresses and headers

	refill       bool          // --refill: keep prefetch pools above their low marks
	refillEvery  time.Duration // --refill-every
	backlogEvery time.Duration // --backlog-every (0: never count)
}

func serveFlags(c *cli.Context) (*serveConfig, error) {
	if _, err := args(c); err != nil {
		return nil, err
	}
	cfg := &serveConfig{listen: c.String("listen"), noAuth: c.Bool("no-auth"), maxConns: c.Int("max-conns"), maxTasks: c.Int("max-tasks")}
	var err error
	if cfg.hold, err = flagvalue.Duration("stale-after", c.String("stale-after")); err != nil {
		return nil, err
	}
	if cfg.hold < 0 {
		return nil, problem.Usagef("invalid --stale-after %s: give 0s (no highlight) or a positive duration such as 4h", cfg.hold)
	}
	if cfg.ttl, err = flagvalue.Duration("cache", c.String("cache")); err != nil {
		return nil, err
	}
	if cfg.ttl < 0 || cfg.ttl > time.Hour {
		return nil, problem.Usagef("invalid --cache %s: give a duration from 0s to 1h, such as 2s", cfg.ttl)
	}
	if cfg.session, err = flagvalue.Duration("session-ttl", c.String("session-ttl")); err != nil {
		return nil, err
	}
	if cfg.session < time.Minute || cfg.session > 720*time.Hour {
		return nil, problem.Usagef("invalid --session-ttl %s: give a duration from 1m to 720h, such as 12h", cfg.session)
	}
	if cfg.maxConns < 1 || cfg.maxConns > 100 {
		return nil, problem.Usagef("invalid --max-conns %d: give 1 to 100 (one refresh uses one connection; each open task page one more)", cfg.maxConns)
	}
	if cfg.maxTasks < 0 {
		return nil, problem.Usagef("invalid --max-tasks %d: give 0 (show every task) or a positive number such as 100", cfg.maxTasks)
	}
	host, port, err := net.SplitHostPort(cfg.listen)
	if err != nil || port == "" {
		return nil, problem.Usagef("invalid --listen %q: give HOST:PORT, such as 127.0.0.1:8080 (port 0 picks a free one)", cfg.listen)
	}
	ip := net.ParseIP(host)
	cfg.loopback = strings.EqualFold(host, "localhost") || (ip != nil && ip.IsLoopback())
	if cfg.token, cfg.named, err = serveToken(c, cfg); err != nil {
		return nil, err
	}
	switch {
	case cfg.noAuth && cfg.token != "":
		return nil, problem.Usagef("--no-auth and a token contradict each other: give one of them")
	case cfg.named && cfg.token == "" && !cfg.noAuth:
		return nil, problem.WithHint(problem.Usagef("the serve token is empty: LOANQ_SERVE_TOKEN or the token file was given but holds nothing"),
			"is the variable set? put the token in a file and give --token-file PATH, or say --no-auth to serve without one")
	case !cfg.loopback && cfg.token == "" && !cfg.noAuth:
		return nil, problem.WithHint(problem.Usagef("refusing to serve on %s without a token: anyone who can reach that address would see the queues", cfg.listen),
			"give --token-file PATH or set LOANQ_SERVE_TOKEN, listen on 127.0.0.1, or say --no-auth to serve without a token")
	}
	for _, h := range c.StringSlice("allowed-hosts") {
		if h = strings.TrimSpace(h); h != "" {
			cfg.allowedHosts = append(cfg.allowedHosts, h)
		}
	}
	if !c.IsSet("allowed-hosts") {
		// A name the operator listens on is how browsers reach it; beyond
		// loopback, so is this machine's name.
		if ip == nil && host != "" {
			cfg.allowedHosts = append(cfg.allowedHosts, host)
		}
		if name, err := os.Hostname(); err == nil && !cfg.loopback && name != "" {
			cfg.allowedHosts = append(cfg.allowedHosts, name)
		}
	}
	if err := serveAPIFlags(c, cfg); err != nil {
		return nil, err
	}
	if err := serveLoopFlags(c, cfg); err != nil {
		return nil, err
	}
	return cfg, nil
}

// serveAPIFlags checks --api and the flags that go with it.
func serveAPIFlags(c *cli.Context, cfg *serveConfig) error {
	cfg.api, cfg.auth = c.Bool("api"), c.String("auth")
	for _, f := range []string{"auth", "trusted-proxy", "user-header", "groups-header", "supervisor-group", "proxy-groups-header"} {
		if c.IsSet(f) && !cfg.api {
			return problem.Usagef("--%s is for the API: give --api too", f)
		}
	}
	if !cfg.api {
		return nil
	}
	switch cfg.auth {
	case "token":
		for _, f := range []string{"trusted-proxy", "user-header", "groups-header", "supervisor-group", "proxy-groups-header"} {
			if c.IsSet(f) {
				return problem.Usagef("--%s is for --auth proxy", f)
			}
		}
	case "proxy":
		var err error
		if cfg.proxy, err = parseProxyAuth(c.StringSlice("trusted-proxy"), c.String("user-header"), c.String("groups-header"), c.String("supervisor-group")); err != nil {
			return err
		}
		cfg.proxy.MembershipHeader = http.CanonicalHeaderKey(strings.TrimSpace(c.String("proxy-groups-header"))) // docs/governance.md
	default:
		return problem.Usagef("invalid --auth %q: give token or proxy", cfg.auth)
	}
	if !c.IsSet("max-conns") { // API callers hold connections while they wait: web.DefaultAPIConns
		cfg.maxConns = web.DefaultAPIConns
	}
	return nil
}

// parseProxyAuth reads --trusted-proxy, --user-header, --groups-header and
// --supervisor-group for --auth proxy.
func parseProxyAuth(cidrs []string, userHeader, groupsHeader, supervisorGroup string) (*web.ProxyAuth, error) {
	pa := &web.ProxyAuth{UserHeader: http.CanonicalHeaderKey(strings.TrimSpace(userHeader)),
		GroupsHeader: http.CanonicalHeaderKey(strings.TrimSpace(groupsHeader)), SupervisorGroup: strings.TrimSpace(supervisorGroup)}
	for _, c := range cidrs {
		for _, part := range strings.Split(c, ",") {
			if part = strings.TrimSpace(part); part == "" {
				continue
			}
			if !strings.Contains(part, "/") {
				if ip := net.ParseIP(part); ip != nil && ip.To4() != nil {
					part += "/32"
				} else {
					part += "/128"
				}
			}
			_, n, err := net.ParseCIDR(part)
			if err != nil {
				return nil, problem.Usagef("invalid --trusted-proxy %q: give the proxy's address or network, such as 10.0.0.5 or 10.0.0.0/24", part)
			}
			pa.Trusted = append(pa.Trusted, n)
		}
	}
	switch {
	case len(pa.Trusted) == 0:
		return nil, problem.Usagef("--auth proxy needs --trusted-proxy CIDR: the addresses whose user header is believed (the reverse proxy's)")
	case pa.UserHeader == "":
		return nil, problem.Usagef("--user-header is empty: name the header the proxy puts the user in, such as X-Forwarded-User")
	case pa.GroupsHeader != "" && pa.SupervisorGroup == "":
		return nil, problem.Usagef("--supervisor-group is empty: name the group whose members are supervisors")
	}
	return pa, nil
}

// serveLoopFlags checks the periods of serve's background loops.
func serveLoopFlags(c *cli.Context, cfg *serveConfig) error {
	var err error
	cfg.refill = c.Bool("refill")
	if cfg.refillEvery, err = flagvalue.Duration("refill-every", c.String("refill-every")); err != nil {
		return err
	}
	if cfg.refill && cfg.refillEvery < time.Second {
		return problem.Usagef("invalid --refill-every %s: give at least 1s", c.String("refill-every"))
	}
	if cfg.backlogEvery, err = flagvalue.Duration("backlog-every", c.String("backlog-every")); err != nil {
		return err
	}
	if cfg.backlogEvery != 0 && cfg.backlogEvery < time.Second {
		return problem.Usagef("invalid --backlog-every %s: give at least 1s, or 0s to never count", c.String("backlog-every"))
	}
	return nil
}

// serveToken reads the token from --token-file or LOANQ_SERVE_TOKEN. named
// reports that one was given, even empty: an empty $TOKEN is a mistake, not a
// request to serve without one. --token is refused: ps shows every process's
// command line to every user of the machine, so the token would be anyone's.
func serveToken(c *cli.Context, cfg *serveConfig) (token string, named bool, err error) {
	if c.IsSet("token") {
		return "", false, problem.WithHint(problem.Usagef("--token is refused: a token on the command line is visible to every user of this machine (ps)"),
			"put the token in a file (one line, chmod 600) and give --token-file PATH, or set LOANQ_SERVE_TOKEN in serve's environment; if others can see this machine's processes, pick a new token")
	}
	token, direct := os.LookupEnv("LOANQ_SERVE_TOKEN")
	file := c.IsSet("token-file")
	if file && direct {
		return "", false, problem.Usagef("give the token once: --token-file or LOANQ_SERVE_TOKEN, not both")
	}
	if file {
		path := c.String("token-file")
		b, err := os.ReadFile(path)
		if err != nil {
			return "", false, problem.Usagef("cannot read --token-file %q: %v", path, errors.Unwrap(err))
		}
		token, _, _ = strings.Cut(string(b), "\n")
		token = strings.TrimSuffix(token, "\r")
		if st, err := os.Stat(path); err == nil && st.Mode().Perm()&0o077 != 0 {
			cfg.warnings = append(cfg.warnings, fmt.Sprintf("%s can be read by other users (mode %04o): chmod 600 it", path, st.Mode().Perm()))
		}
	}
	if token != "" && strings.TrimSpace(token) != token {
		return "", false, problem.Usagef("invalid token: it starts or ends with white space (check LOANQ_SERVE_TOKEN or the token file)")
	}
	return token, file || direct, nil
}

func serve(c *cli.Context) error {
	cfg, err := serveFlags(c)
	if err != nil {
		return err
	}
	lg, err := newEventLog(c)
	if err != nil {
		return err
	}
	for _, w := range cfg.warnings {
		lg.Event(slog.LevelWarn, "loanq serve: warning: "+w, w)
	}

	// Open without the embedded SQLite's self-migration: serve writes
	// nothing. The pool is bounded: however many requests arrive, the
	// database sees at most --max-conns sessions from this process.
	opened, err := openDB(c, schema.Options{Check: true, Conns: cfg.maxConns})
	if err != nil {
		return err
	}
	defer opened.Close()
	// Give idle sessions back to the server between refreshes.
	opened.DB.SetConnMaxIdleTime(time.Minute)
	d, db := opened.Driver, opened.DB
	// What goes wrong while serving (a refresh, a count, an API call) and
	// the recovery of the database: errors, but for the recovery.
	logf := func(s string) {
		level := slog.LevelError
		if s == dashboard.RecoveredMsg {
			level = slog.LevelInfo
		}
		lg.Event(level, "loanq serve: "+s, s)
	}
	src := &dashboard.Source{DB: db, Driver: d, Admin: dispatch.NewAdmin(db, d), TTL: cfg.ttl, Hold: cfg.hold, Log: logf}
	wcfg := web.Config{Figures: src, Token: cfg.token, PerUser: c.Bool("metrics-per-user"), Log: logf,
		AllowedHosts: cfg.allowedHosts, SessionTTL: cfg.session, MaxTasks: cfg.maxTasks}
	if cfg.api {
		wcfg.Engine, wcfg.Proxy = dispatch.New(db, d), cfg.proxy
	}
	h, err := web.Handler(wcfg)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		hint := "check --listen"
		if errors.Is(err, syscall.EADDRINUSE) {
			hint = "another process uses that port: stop it or choose another with --listen HOST:PORT"
		}
		return &problem.Error{Kind: problem.Usage, Msg: fmt.Sprintf("cannot listen on %s: %v", cfg.listen, errors.Unwrap(err)), Hint: hint}
	}
	if cfg.token == "" && !cfg.loopback {
		lg.Event(slog.LevelWarn, fmt.Sprintf("loanq serve: warning: --no-auth: listening on %s without a token: anyone who can reach it sees the queues", cfg.listen),
			"--no-auth: listening without a token: anyone who can reach it sees the queues", "listen", cfg.listen)
	}
	if cfg.refill {
		go refillLoop(c.Context, dispatch.New(db, d), cfg.refillEvery, logf)
	}
	if cfg.backlogEvery > 0 {
		go src.RunBacklog(c.Context, cfg.backlogEvery)
	}
	// The first refresh before the first visitor: /healthz has a state to
	// report from the start.
	first, cancel := context.WithTimeout(c.Context, 30*time.Second)
	src.Get(first)
	cancel()
	auth := ""
	if cfg.token != "" {
		auth = "; token required (open /?token=TOKEN once, or send Authorization: Bearer TOKEN)"
	}
	mode := "read-only"
	if cfg.api {
		mode = "API on /api/v1/ (" + cfg.auth + " auth)"
	}
	fmt.Fprintf(c.App.Writer, "loanq serve: dashboard on http://%s/ (database %s, %s%s); /metrics, /healthz\n",
		ln.Addr(), d.Name(), mode, auth)
	if lg.JSON() {
		lg.j.Info("serving", "address", ln.Addr().String(), "database", d.Name(), "api", cfg.api, "token", cfg.token != "")
	}
	if err := web.Serve(c.Context, h, ln); err != nil {
		return fmt.Errorf("serving on %s: %w", ln.Addr(), err)
	}
	return nil
}

// refillLoop is serve --refill: every interval, the pools at or below their
// low mark are refilled (dispatch.RefillAll). A failure is logged once a
// minute at most; the loop goes on until serve stops.
func refillLoop(ctx context.Context, e *dispatch.Engine, every time.Duration, logf func(string)) {
	var lastLog time.Time
	for {
		if _, err := e.RefillAll(ctx); err != nil && ctx.Err() == nil && time.Since(lastLog) > time.Minute {
			logf("refill: " + err.Error())
			lastLog = time.Now()
		}
		if pause.For(ctx, every) != nil {
			return
		}
	}
}
