// Package apiload drives a `loanq serve --api` node with many concurrent API
// clients, as processors' applications would: each client asks for work
// (POST …/requests), follows a 202 by long-polling its request, and
// completes every loan it gets, until the run's time is up. It measures
// calls per second and latency percentiles, and counts every answer that is
// neither 200 nor 202 (and every transport failure) as an error. It also
// reads the node's own figures (loanq_serve_… in /metrics) so a run can show
// that goroutines and memory come back after the load.
//
// scripts/api-load runs it from the command line (BENCHMARKS.md); the e2e
// test TestAPILoadShort runs a short version in CI.
package apiload

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Options of a run.
type Options struct {
	URL      string   // the node, http://HOST:PORT
	Task     string   // the task asked for
	Tokens   []string // one API token per client (one user each)
	Duration time.Duration
	Count    int // loans per request (default 1)
	WaitMs   int // wait_ms of POST and of each long poll (default 2000)
}

// Result of a run.
type Result struct {
	Clients  int           `json:"clients"`
	Elapsed  time.Duration `json:"-"`
	ElapsedS float64       `json:"elapsed_s"`
	// Calls is every HTTP call made: gets, long polls, dispositions.
	Calls       int64         `json:"calls"`
	CallsPerSec float64       `json:"calls_per_s"`
	Requests    int64         `json:"requests"` // POST …/requests
	Polls       int64         `json:"polls"`    // GET /requests/ID after a 202
	Loans       int64         `json:"loans_completed"`
	LoansPerSec float64       `json:"loans_per_s"`
	Empty       int64         `json:"empty_answers"`
	Status      map[int]int64 `json:"status"`
	// Errors are answers other than 200 and 202, and transport failures.
	Errors  int64         `json:"errors"`
	Samples []string      `json:"error_samples,omitempty"`
	P50     time.Duration `json:"-"`
	P99     time.Duration `json:"-"`
	Max     time.Duration `json:"-"`
	P50ms   float64       `json:"p50_ms"`
	P99ms   float64       `json:"p99_ms"`
	MaxMs   float64       `json:"max_ms"`
}

type client struct {
	o      Options
	token  string
	http   *http.Client
	lat    []time.Duration
	status map[int]int64
	res    Result
}

// call sends one API call and decodes its JSON answer.
func (c *client) call(ctx context.Context, method, path string, body any) (int, map[string]any, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.o.URL+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	start := time.Now()
	res, err := c.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	raw, err := io.ReadAll(res.Body)
	res.Body.Close()
	c.lat = append(c.lat, time.Since(start))
	c.res.Calls++
	c.status[res.StatusCode]++
	if err != nil {
		return res.StatusCode, nil, err
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return res.StatusCode, nil, fmt.Errorf("%s %s: %d, not JSON: %.200s", method, path, res.StatusCode, raw)
	}
	if res.StatusCode != 200 && res.StatusCode != 202 {
		return res.StatusCode, doc, fmt.Errorf("%s %s: %d %v", method, path, res.StatusCode, doc["detail"])
	}
	return res.StatusCode, doc, nil
}

// cycle is one get: ask, poll while pending, complete what came.
func (c *client) cycle(ctx context.Context) error {
	code, doc, err := c.call(ctx, "POST", "/api/v1/tasks/"+c.o.Task+"/requests", map[string]any{"count": c.o.Count, "wait_ms": c.o.WaitMs})
	c.res.Requests++
	for err == nil && code == 202 {
		id := int64(doc["request_id"].(float64))
		code, doc, err = c.call(ctx, "GET", "/api/v1/requests/"+strconv.FormatInt(id, 10)+"?wait_ms="+strconv.Itoa(c.o.WaitMs), nil)
		c.res.Polls++
	}
	if err != nil {
		return err
	}
	loans, _ := doc["loans"].([]any)
	if len(loans) == 0 {
		c.res.Empty++
		return nil
	}
	for _, l := range loans {
		path := fmt.Sprintf("/api/v1/tasks/%s/loans/%d/disposition", c.o.Task, int64(l.(float64)))
		if _, _, err := c.call(ctx, "POST", path, map[string]any{"action": "complete"}); err != nil {
			return err
		}
		c.res.Loans++
	}
	return nil
}

// Run runs len(o.Tokens) clients at once for o.Duration. A client's cycle
// under way when the time is up is finished (its request answered and its
// loans completed), so the run leaves no pending request behind. Idle
// connections are closed at the end, so the node's goroutines can come back.
func Run(ctx context.Context, o Options) (*Result, error) {
	if o.Count <= 0 {
		o.Count = 1
	}
	if o.WaitMs <= 0 {
		o.WaitMs = 2000
	}
	if len(o.Tokens) == 0 || o.URL == "" || o.Task == "" || o.Duration <= 0 {
		return nil, fmt.Errorf("apiload: give a URL, a task, tokens and a duration")
	}
	tr := &http.Transport{MaxIdleConns: len(o.Tokens) * 2, MaxIdleConnsPerHost: len(o.Tokens) * 2, IdleConnTimeout: time.Minute}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: time.Duration(o.WaitMs)*time.Millisecond + 30*time.Second}
	// Finishing cycles get at most a minute past the end.
	runCtx, cancel := context.WithTimeout(ctx, o.Duration+time.Minute)
	defer cancel()
	clients := make([]*client, len(o.Tokens))
	var wg sync.WaitGroup
	start := time.Now()
	end := start.Add(o.Duration)
	for i, tok := range o.Tokens {
		c := &client{o: o, token: tok, http: hc, status: map[int]int64{}}
		clients[i] = c
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) && runCtx.Err() == nil {
				if err := c.cycle(runCtx); err != nil {
					c.res.Errors++
					if len(c.res.Samples) < 3 {
						c.res.Samples = append(c.res.Samples, err.Error())
					}
					time.Sleep(100 * time.Millisecond) // no hot loop on a failing node
				}
			}
		}()
	}
	wg.Wait()
	r := &Result{Clients: len(o.Tokens), Elapsed: time.Since(start), Status: map[int]int64{}}
	var lat []time.Duration
	for _, c := range clients {
		r.Calls += c.res.Calls
		r.Requests += c.res.Requests
		r.Polls += c.res.Polls
		r.Loans += c.res.Loans
		r.Empty += c.res.Empty
		for k, v := range c.status {
			r.Status[k] += v
		}
		r.Errors += c.res.Errors
		for _, s := range c.res.Samples {
			if len(r.Samples) < 5 {
				r.Samples = append(r.Samples, s)
			}
		}
		lat = append(lat, c.lat...)
	}
	slices.Sort(lat)
	if n := len(lat); n > 0 {
		r.P50, r.P99, r.Max = lat[n*50/100], lat[min(n-1, n*99/100)], lat[n-1]
	}
	r.ElapsedS = r.Elapsed.Seconds()
	r.CallsPerSec = float64(r.Calls) / r.ElapsedS
	r.LoansPerSec = float64(r.Loans) / r.ElapsedS
	r.P50ms, r.P99ms, r.MaxMs = ms(r.P50), ms(r.P99), ms(r.Max)
	return r, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// Runtime is a node's own figures, from its /metrics.
type Runtime struct {
	Goroutines int     `json:"goroutines"`
	HeapInuse  float64 `json:"heap_inuse_bytes"`
	Sys        float64 `json:"memory_sys_bytes"`
	ConnsOpen  int     `json:"db_connections_open"`
	ConnWaits  float64 `json:"db_connection_waits"`
}

// Scrape reads the loanq_serve_… figures of the node at url (/metrics;
// token: the dashboard's --token, "" when none).
func Scrape(ctx context.Context, url, token string) (Runtime, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", url+"/metrics", nil)
	if err != nil {
		return Runtime{}, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return Runtime{}, err
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		return Runtime{}, fmt.Errorf("GET /metrics: %d", res.StatusCode)
	}
	var rt Runtime
	seen := 0
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		name, v, ok := strings.Cut(sc.Text(), " ")
		if !ok || strings.HasPrefix(name, "#") {
			continue
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil {
			continue
		}
		switch name {
		case "loanq_serve_goroutines":
			rt.Goroutines, seen = int(f), seen+1
		case "loanq_serve_heap_inuse_bytes":
			rt.HeapInuse = f
		case "loanq_serve_memory_sys_bytes":
			rt.Sys = f
		case "loanq_serve_db_connections_open":
			rt.ConnsOpen = int(f)
		case "loanq_serve_db_connection_waits_total":
			rt.ConnWaits = f
		}
	}
	if seen == 0 {
		return rt, fmt.Errorf("/metrics has no loanq_serve_goroutines: is this loanq serve?")
	}
	return rt, sc.Err()
}

// Settle scrapes the node until its goroutines stop falling to within slack
// of baseline, or for at most wait; it returns the last figures.
func Settle(ctx context.Context, url, token string, baseline, slack int, wait time.Duration) (Runtime, error) {
	deadline := time.Now().Add(wait)
	for {
		rt, err := Scrape(ctx, url, token)
		if err != nil || rt.Goroutines <= baseline+slack || time.Now().After(deadline) {
			return rt, err
		}
		time.Sleep(250 * time.Millisecond)
	}
}
