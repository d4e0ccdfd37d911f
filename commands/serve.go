package commands

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/loanq/loanq/dashboard"
	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/problem"
	"github.com/loanq/loanq/schema"
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
                  It refreshes itself every 3 seconds.
   /tasks/NAME    one task: its definition, latest criteria runs and dispositions
   /metrics       Prometheus text exposition (loanq_… metrics)
   /healthz       200 and one line of JSON when the database answers, 503 otherwise

Read-only: it never writes to the database and never runs a task's criteria query;
its figures come from loanq's own tables, cached for --cache, so any number of
viewers cost one refresh per interval. It listens on 127.0.0.1 unless --listen says
otherwise. With --token (or LOANQ_SERVE_TOKEN) every path but /healthz needs
"Authorization: Bearer TOKEN", or a session cookie set by opening the page once
as http://HOST:PORT/?token=TOKEN. See docs/dashboard.md.

Examples:
   loanq serve
   loanq --db postgres://app@db:5432/loans serve --listen 127.0.0.1:9180 --stale-after 4h
   LOANQ_SERVE_TOKEN=s3cret loanq serve --listen 0.0.0.0:8080 --metrics-per-user`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "listen", Value: "127.0.0.1:8080", Usage: "`HOST:PORT` to listen on (port 0: any free port, printed at start)"},
			&cli.StringFlag{Name: "token", EnvVars: []string{"LOANQ_SERVE_TOKEN"}, Usage: "require this bearer `TOKEN` (or the cookie of a ?token= link)"},
			&cli.BoolFlag{Name: "metrics-per-user", Usage: "also export active work per task and user (one series per processor)"},
			&cli.StringFlag{Name: "stale-after", Value: "0s", Usage: "highlight active work held `D` or longer (e.g. 4h; 0s: no highlight)"},
			&cli.StringFlag{Name: "cache", Value: "2s", Usage: "serve the figures of one refresh for `D` (every viewer shares it)"},
		},
		Action: serve,
	}
}

func serve(c *cli.Context) error {
	if _, err := args(c); err != nil {
		return err
	}
	hold, err := parseDuration("stale-after", c.String("stale-after"))
	if err != nil {
		return err
	}
	if hold < 0 {
		return problem.Usagef("invalid --stale-after %s: give 0s (no highlight) or a positive duration such as 4h", hold)
	}
	ttl, err := parseDuration("cache", c.String("cache"))
	if err != nil {
		return err
	}
	if ttl < 0 || ttl > time.Hour {
		return problem.Usagef("invalid --cache %s: give a duration from 0s to 1h, such as 2s", ttl)
	}
	listen := c.String("listen")
	host, port, err := net.SplitHostPort(listen)
	if err != nil || port == "" {
		return problem.Usagef("invalid --listen %q: give HOST:PORT, such as 127.0.0.1:8080 (port 0 picks a free one)", listen)
	}
	token := c.String("token")
	if token != "" && strings.TrimSpace(token) != token {
		return problem.Usagef("invalid --token: it starts or ends with white space (check LOANQ_SERVE_TOKEN)")
	}

	// Open without the embedded SQLite's self-migration: serve writes nothing.
	opened, err := openDB(c, schema.Options{Check: true})
	if err != nil {
		return err
	}
	defer opened.Close()
	d, db := opened.Driver, opened.DB
	src := &dashboard.Source{DB: db, Driver: d, Engine: dispatch.New(db, d), TTL: ttl, Hold: hold}
	srv := &dashboard.Server{Source: src, Token: token, PerUser: c.Bool("metrics-per-user"),
		Log: func(s string) { fmt.Fprintf(c.App.ErrWriter, "loanq serve: %s\n", s) }}
	h, err := srv.Handler()
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		hint := "check --listen"
		if errors.Is(err, syscall.EADDRINUSE) {
			hint = "another process uses that port: stop it or choose another with --listen HOST:PORT"
		}
		return &problem.Error{Kind: problem.Usage, Msg: fmt.Sprintf("cannot listen on %s: %v", listen, errors.Unwrap(err)), Hint: hint}
	}
	ip := net.ParseIP(host)
	if token == "" && (ip == nil || !ip.IsLoopback()) {
		fmt.Fprintf(c.App.ErrWriter, "loanq serve: warning: listening on %s without --token: anyone who can reach it sees the queues\n", listen)
	}
	auth := ""
	if token != "" {
		auth = "; token required (open /?token=TOKEN once, or send Authorization: Bearer TOKEN)"
	}
	fmt.Fprintf(c.App.Writer, "loanq serve: dashboard on http://%s/ (database %s, read-only%s); /metrics, /healthz\n",
		ln.Addr(), d.Name(), auth)
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	if err := dashboard.Serve(c.Context, hs, ln); err != nil {
		return fmt.Errorf("serving on %s: %w", ln.Addr(), err)
	}
	return nil
}
