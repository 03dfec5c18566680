package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/budget"
	"github.com/failsafe-go/failsafe-go/failsafehttp"

	"github.com/MrVSiK/gotry/transport"
)

// The fleet scenarios of issue #28: retries measured where production has
// them, at many quiet replicas sharing a downstream, along a chain of
// services, and at a slow host with little traffic.

// FleetShape is a fleet: Clients clients, each its own transport, each
// offering PerClient requests a second.
type FleetShape struct {
	Clients   int
	PerClient float64
}

// fleetShapes are 500 requests a second in all, spread over 1 to 500
// clients (issue #28) and over 1,000 quiet ones at one request every two
// seconds (issue #37: the fleet bound for 500 and 1,000 quiet clients).
var fleetShapes = []FleetShape{{1, 500}, {20, 25}, {100, 5}, {500, 1}, {1000, 0.5}}

// fleetAttempts is every candidate's attempts per request in the fleet and
// chain scenarios: gotry's default.
const fleetAttempts = transport.DefaultMaxAttempts

// peerFleetRetry is the peers' retry configuration: gotry's attempts, and a
// constant 10ms backoff, shorter than gotry's default, so that the peers'
// retries are not what keeps the run long.
var peerFleetRetry = retryConfig{attempts: fleetAttempts, backoff: 10 * time.Millisecond}

// fleetCandidate builds one client's RoundTripper over a shared base: each
// client has its own retry state (budget), as a replica of a fleet does.
type fleetCandidate struct {
	name string
	new  func(base http.RoundTripper) http.RoundTripper
}

var fleetCandidates = []fleetCandidate{
	{"gotry defaults", func(b http.RoundTripper) http.RoundTripper { return transport.New(b) }},
	{"failsafe-go retry+budget", func(b http.RoundTripper) http.RoundTripper { return failsafeRetryBudget(b, peerFleetRetry) }},
	{"go-retryablehttp", func(b http.RoundTripper) http.RoundTripper { return retryableHTTP(b, peerFleetRetry) }},
}

// failsafeRetryBudget is failsafeRetry with failsafe-go's retry budget at its
// defaults (a budget per client, as each replica would have).
func failsafeRetryBudget(base http.RoundTripper, rc retryConfig) http.RoundTripper {
	//nolint:bodyclose // no response is obtained here; see failsafeRetry
	rp := failsafehttp.NewRetryPolicyBuilder().WithMaxAttempts(rc.attempts).WithDelay(rc.backoff).
		ReturnLastFailure().WithBudget(budget.New()).
		OnRetryScheduled(func(e failsafe.ExecutionScheduledEvent[*http.Response]) { finish(e.LastResult()) }).
		Build()
	return failsafehttp.NewRoundTripper(base, rp)
}

// budgetBound is the most attempts a fresh gotry client with the default
// budget sends for requests that all fail: each request once, plus its
// reserve, and never more than its attempts per request (a client with
// one request, or none, cannot spend the whole reserve). Nothing succeeds,
// so nothing is deposited, refunded or refilled: the budget's bound
// (resilience/budget.go) with no successes.
func budgetBound(requests int64) int64 {
	return min(requests+transport.DefaultBudgetReserve, transport.DefaultMaxAttempts*requests)
}

// fleetBound is budgetBound summed over a fleet of clients sharing requests
// by fleetLoop's schedule, which gives the clients turns, so their shares
// differ by one at most.
func fleetBound(requests, clients int64) int64 {
	per, extra := requests/clients, requests%clients
	return extra*budgetBound(per+1) + (clients-extra)*budgetBound(per)
}

// countingServer is a loopback server that counts what arrives and answers
// with answer's status.
type countingServer struct {
	srv      *httptest.Server
	arrivals atomic.Int64
}

func newCountingServer(answer func() int) *countingServer {
	s := &countingServer{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		s.arrivals.Add(1)
		w.WriteHeader(answer())
	}))
	return s
}

// always503 is an outage; flaky503 a random 5% of 503s.
func always503() int { return http.StatusServiceUnavailable }

func flaky503() int {
	if rand.Float64() < 0.05 { //nolint:gosec // a load shape, not a secret
		return http.StatusServiceUnavailable
	}
	return http.StatusOK
}

// fleetLoop offers perClient requests a second from every client for d, the
// clients' arrivals evenly interleaved (one schedule drives them all, so a
// fleet of 500 quiet clients costs one timer, not 500), and returns how many
// requests were sent and how many succeeded.
func fleetLoop(clients []*http.Client, url string, perClient float64, d time.Duration) (sent, ok, errs int64) {
	total := perClient * float64(len(clients))
	n := int(total * d.Seconds())
	interval := time.Duration(float64(time.Second) / total)
	sem := make(chan struct{}, 1024)
	var wg sync.WaitGroup
	var good, bad atomic.Int64
	t0 := time.Now()
	for i := range n {
		if w := time.Until(t0.Add(time.Duration(i) * interval)); w > 0 {
			time.Sleep(w)
		}
		sem <- struct{}{}
		wg.Add(1)
		go func(c *http.Client) {
			defer wg.Done()
			defer func() { <-sem }()
			resp, err := c.Get(url)
			switch {
			case err != nil:
				bad.Add(1)
			case resp.StatusCode == http.StatusOK:
				good.Add(1)
			}
			finish(resp)
		}(clients[i%len(clients)])
	}
	wg.Wait()
	return int64(n), good.Load(), bad.Load()
}

// FleetRow is one candidate's fleet.
type FleetRow struct {
	Name             string
	Shape            FleetShape
	Requests, Server int64 // sent by the fleet, received by the server
	OK               int64 // requests that succeeded
	Errors           int64 // requests that ended with an error instead of an answer (a peer giving up reports one)
	PerRequest       float64
	Success          float64
}

// FleetResult is the fleet tables: an outage, and 5% of random 503s.
type FleetResult struct {
	Duration time.Duration
	Outage   []FleetRow
	Flaky    []FleetRow
	Chain    *ChainResult
	Slow     *SlowResult
}

// runFleetShape runs every candidate on its own server, side by side, for
// one shape and answer.
func runFleetShape(cfg *Config, sh FleetShape, answer func() int) []FleetRow {
	rows := make([]FleetRow, len(fleetCandidates))
	var wg sync.WaitGroup
	for ci, fc := range fleetCandidates {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := newCountingServer(answer)
			defer s.srv.Close()
			base := newLoopbackBase()
			defer base.CloseIdleConnections()
			clients := make([]*http.Client, sh.Clients)
			for i := range clients {
				clients[i] = &http.Client{Transport: fc.new(base)}
			}
			sent, ok, errs := fleetLoop(clients, s.srv.URL, sh.PerClient, cfg.fleetTime)
			srv := s.arrivals.Load()
			rows[ci] = FleetRow{Name: fc.name, Shape: sh, Requests: sent, Server: srv, OK: ok, Errors: errs,
				PerRequest: float64(srv) / float64(max(sent, 1)), Success: float64(ok) / float64(max(sent, 1))}
		}()
	}
	wg.Wait()
	return rows
}

func runFleet(cfg *Config) (*FleetResult, error) {
	res := &FleetResult{Duration: cfg.fleetTime}
	for _, sh := range fleetShapes {
		cfg.progress("fleet outage: %d clients x %g/s", sh.Clients, sh.PerClient)
		res.Outage = append(res.Outage, runFleetShape(cfg, sh, always503)...)
	}
	for _, sh := range fleetShapes {
		cfg.progress("fleet, 5%% random 503s: %d clients x %g/s", sh.Clients, sh.PerClient)
		res.Flaky = append(res.Flaky, runFleetShape(cfg, sh, flaky503)...)
	}
	res.Chain = runChain(cfg)
	res.Slow = runSlow(cfg)
	return res, nil
}

// ChainRow is one chain run: client → A → B → leaf.
type ChainRow struct {
	Name       string
	Rate       float64 // top-level requests a second
	Leaf       string  // "down" or "5% 503s"
	Requests   int64
	OK         int64
	Errors     int64 // requests that ended with an error instead of an answer (a peer giving up reports one)
	Arrivals   int64 // at the leaf
	PerRequest float64
	Success    float64
}

// ChainResult is the chain table.
type ChainResult struct {
	Duration time.Duration
	Rows     []ChainRow
}

// chainRates are the top-level rates.
var chainRates = []float64{5, 50, 200}

// hopHandler is a service of the chain: it calls next through its own
// RoundTripper with the incoming request's context and answers with next's
// status.
func hopHandler(rt http.RoundTripper, next string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, next, nil)
		resp, err := rt.RoundTrip(req)
		if err != nil {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		finish(resp)
		w.WriteHeader(resp.StatusCode)
	})
}

// chainSetup is how every hop of a chain is built: its RoundTripper, and
// what wraps its handler.
type chainSetup struct {
	name string
	new  func(base http.RoundTripper) http.RoundTripper
	wrap func(http.Handler) http.Handler
}

// chainPeers and chainCallers are the hop protocol's trusted set-up on
// loopback, where the chain runs: every transport takes the loopback hosts
// for peers, and every service trusts callers from loopback.
var (
	chainPeers   = transport.WithHopPeers(func(host string) bool { return host == "127.0.0.1" || host == "::1" })
	chainCallers = transport.WithTrustedCallers(transport.CallersFrom(
		netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")))
)

var chainSetups = []chainSetup{
	{"gotry defaults + Middleware, trusted set-up (loopback peers and callers)",
		func(b http.RoundTripper) http.RoundTripper { return transport.New(b, chainPeers) },
		func(h http.Handler) http.Handler { return transport.Middleware(h, chainCallers) }},
	{"gotry defaults, no Middleware", func(b http.RoundTripper) http.RoundTripper { return transport.New(b) }, nil},
	{"failsafe-go retry+budget", func(b http.RoundTripper) http.RoundTripper { return failsafeRetryBudget(b, peerFleetRetry) }, nil},
	{"go-retryablehttp", func(b http.RoundTripper) http.RoundTripper { return retryableHTTP(b, peerFleetRetry) }, nil},
}

// runChainOnce runs one chain: client → A → B → leaf, every hop with its
// own base and RoundTripper.
func runChainOnce(cfg *Config, cs chainSetup, rate float64, answer func() int, leafName string) ChainRow {
	leaf := newCountingServer(answer)
	defer leaf.srv.Close()
	url := leaf.srv.URL
	for range 2 { // B, then A
		base := newLoopbackBase()
		defer base.CloseIdleConnections()
		h := hopHandler(cs.new(base), url)
		if cs.wrap != nil {
			h = cs.wrap(h)
		}
		srv := httptest.NewServer(h)
		defer srv.Close()
		url = srv.URL
	}
	base := newLoopbackBase()
	defer base.CloseIdleConnections()
	client := &http.Client{Transport: cs.new(base)}
	sent, ok, errs := fleetLoop([]*http.Client{client}, url, rate, cfg.chainTime)
	n := leaf.arrivals.Load()
	return ChainRow{Name: cs.name, Rate: rate, Leaf: leafName, Requests: sent, OK: ok, Errors: errs, Arrivals: n,
		PerRequest: float64(n) / float64(max(sent, 1)), Success: float64(ok) / float64(max(sent, 1))}
}

func runChain(cfg *Config) *ChainResult {
	res := &ChainResult{Duration: cfg.chainTime}
	for _, leaf := range []struct {
		name   string
		answer func() int
	}{{"down", always503}, {"5% 503s", flaky503}} {
		for _, rate := range chainRates {
			cfg.progress("chain, leaf %s: %g/s", leaf.name, rate)
			// Two at a time: gotry's two set-ups, then the peers, whose
			// chains at the leaf's outage send up to 27 attempts a request
			// and would load the machine under gotry's.
			rows := make([]ChainRow, len(chainSetups))
			for pair := 0; pair < len(chainSetups); pair += 2 {
				var wg sync.WaitGroup
				for i := pair; i < min(pair+2, len(chainSetups)); i++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						rows[i] = runChainOnce(cfg, chainSetups[i], rate, leaf.answer, leaf.name)
					}()
				}
				wg.Wait()
			}
			res.Rows = append(res.Rows, rows...)
		}
	}
	return res
}

// slowHost is a host with few workers and a FIFO queue that never notices a
// client giving up: every request that arrives is served in turn, service
// time × factor each, as a thread-pool server without deadline propagation
// does.
type slowHost struct {
	srv     *httptest.Server
	workers chan struct{}
	service time.Duration
	factor  atomic.Int64 // service time multiplier, in percent
	start   time.Time
	mu      sync.Mutex
	perSec  []int64 // arrivals per second since start
}

func newSlowHost(workers int, service time.Duration, seconds int) *slowHost {
	h := &slowHost{workers: make(chan struct{}, workers), service: service, perSec: make([]int64, seconds+1)}
	h.factor.Store(100)
	h.start = time.Now()
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		h.mu.Lock()
		if s := int(time.Since(h.start) / time.Second); s < len(h.perSec) {
			h.perSec[s]++
		}
		h.mu.Unlock()
		h.workers <- struct{}{}
		time.Sleep(h.service * time.Duration(h.factor.Load()) / 100)
		<-h.workers
		w.WriteHeader(http.StatusOK)
	}))
	return h
}

// attemptTimeout bounds each attempt through it to d, as gotry's
// WithPerAttemptTimeout does, for the candidates without one: the body is
// read within the attempt, so the timer ends with it.
type attemptTimeout struct {
	base http.RoundTripper
	d    time.Duration
}

func (a attemptTimeout) RoundTrip(r *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithTimeout(r.Context(), a.d)
	defer cancel()
	resp, err := a.base.RoundTrip(r.WithContext(ctx))
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(b))
	return resp, nil
}

// SlowRow is one candidate at the slow host.
type SlowRow struct {
	Name     string
	PerSec   []int64 // arrivals at the host per second
	OKPerSec []int64 // requests that succeeded, by the second they were sent in
	SentPer  []int64 // requests sent, by second
	Recovery time.Duration
	Peak     float64 // the largest second's arrivals ÷ the offered rate
	Sent, OK int64
}

// SlowResult is the slow-host table.
type SlowResult struct {
	Workers             int
	Service, Timeout    time.Duration
	Rate                float64
	Before, Drop, After time.Duration
	Factor              float64
	Rows                []SlowRow
}

// slowCandidates: the no-retry reference and the retriers, each with a 1s
// timeout per attempt.
func slowCandidates(timeout time.Duration) []fleetCandidate {
	return []fleetCandidate{
		{"no retries", func(b http.RoundTripper) http.RoundTripper { return attemptTimeout{b, timeout} }},
		{"gotry defaults + 1s attempt timeout", func(b http.RoundTripper) http.RoundTripper {
			return transport.New(b, transport.WithPerAttemptTimeout(timeout))
		}},
		{"failsafe-go retry+budget", func(b http.RoundTripper) http.RoundTripper {
			return failsafeRetryBudget(attemptTimeout{b, timeout}, peerFleetRetry)
		}},
		{"go-retryablehttp", func(b http.RoundTripper) http.RoundTripper {
			return retryableHTTP(attemptTimeout{b, timeout}, peerFleetRetry)
		}},
	}
}

// runSlow offers the slow host its rate, evenly spaced, through each
// candidate on a host of its own, side by side: Before at normal speed, Drop
// at Factor times the service time, After at normal speed again.
func runSlow(cfg *Config) *SlowResult {
	res := &SlowResult{Workers: 2, Service: 200 * time.Millisecond, Timeout: time.Second, Rate: 7, Factor: 2,
		Before: cfg.slowBefore, Drop: cfg.slowDrop, After: cfg.slowAfter}
	cands := slowCandidates(res.Timeout)
	res.Rows = make([]SlowRow, len(cands))
	total := res.Before + res.Drop + res.After
	seconds := int(total / time.Second)
	cfg.progress("slow host: %v", total)
	var wg sync.WaitGroup
	for ci, c := range cands {
		wg.Add(1)
		go func() {
			defer wg.Done()
			host := newSlowHost(res.Workers, res.Service, seconds+10)
			defer host.srv.Close()
			base := newLoopbackBase()
			defer base.CloseIdleConnections()
			client := &http.Client{Transport: c.new(base)}
			n := int(res.Rate * total.Seconds())
			interval := time.Duration(float64(time.Second) / res.Rate)
			ok := make([]int64, seconds+1)
			sent := make([]int64, seconds+1)
			var mu sync.Mutex
			var rw sync.WaitGroup
			t0 := host.start
			drop := time.AfterFunc(res.Before, func() { host.factor.Store(int64(100 * res.Factor)) })
			up := time.AfterFunc(res.Before+res.Drop, func() { host.factor.Store(100) })
			defer drop.Stop()
			defer up.Stop()
			for i := range n {
				at := time.Duration(i) * interval
				if w := time.Until(t0.Add(at)); w > 0 {
					time.Sleep(w)
				}
				s := int(at / time.Second)
				rw.Add(1)
				go func() {
					defer rw.Done()
					resp, err := client.Get(host.srv.URL)
					good := err == nil && resp.StatusCode == http.StatusOK
					finish(resp)
					mu.Lock()
					sent[s]++
					if good {
						ok[s]++
					}
					mu.Unlock()
				}()
			}
			rw.Wait()
			host.mu.Lock()
			row := SlowRow{Name: c.name, PerSec: append([]int64(nil), host.perSec[:seconds]...), OKPerSec: ok[:seconds], SentPer: sent[:seconds]}
			host.mu.Unlock()
			for s := range seconds {
				row.Sent += sent[s]
				row.OK += ok[s]
				row.Peak = max(row.Peak, float64(row.PerSec[s])/res.Rate)
			}
			row.Recovery = recoveryAfter(ok[:seconds], sent[:seconds], int((res.Before+res.Drop)/time.Second))
			res.Rows[ci] = row
		}()
	}
	wg.Wait()
	return res
}

// recoveryAfter is how long after second from the requests sent succeed
// again: the start of the first second from which every later second has
// 90% of its requests succeed; the whole rest of the run if none does.
func recoveryAfter(ok, sent []int64, from int) time.Duration {
	rec := len(ok)
	for s := len(ok) - 1; s >= from; s-- {
		if sent[s] > 0 && float64(ok[s]) < 0.9*float64(sent[s]) {
			break
		}
		rec = s
	}
	return time.Duration(rec-from) * time.Second
}

func (res *FleetResult) write(w io.Writer) {
	if len(res.Outage) > 0 {
		res.writeFleets(w)
	}
	res.writeRest(w)
}

// writeFleets writes the fleet tables.
func (res *FleetResult) writeFleets(w io.Writer) {
	fmt.Fprintf(w, "\n### Fleets in an outage\n\nEvery answer is 503. 500 requests/s in all, spread over N clients, each with its own transport (gotry: `transport.New(base)`, defaults; peers: %d attempts, a 10ms constant backoff, failsafe-go with its retry budget at its defaults), for %v; candidates side by side on servers of their own.\n\n",
		fleetAttempts, res.Duration)
	writeFleetRows(w, res.Outage)
	fmt.Fprintf(w, "\n### Fleets with 5%% random 503s\n\nThe same fleets; every answer is a 503 with probability 0.05.\n\n")
	writeFleetRows(w, res.Flaky)
}

// writeRest writes the chain and slow-host tables, those that ran.
func (res *FleetResult) writeRest(w io.Writer) {
	if c := res.Chain; c != nil {
		fmt.Fprintf(w, "\n### A chain of services\n\nclient → A → B → leaf, every hop its own transport, for %v a run. Leaf arrivals per top-level request, and the requests that succeeded at the top.\n\n", c.Duration)
		fmt.Fprintf(w, "| set-up | leaf | rate | requests | leaf arrivals | per request | success | errors |\n|---|---|---:|---:|---:|---:|---:|---:|\n")
		for _, r := range c.Rows {
			fmt.Fprintf(w, "| %s | %s | %g/s | %d | %d | %.3f | %.2f%% | %d |\n", r.Name, r.Leaf, r.Rate, r.Requests, r.Arrivals, r.PerRequest, 100*r.Success, r.Errors)
		}
	}
	if s := res.Slow; s != nil {
		fmt.Fprintf(w, "\n### A slow, low-rate host\n\n%d workers × %v, a FIFO queue that serves abandoned requests too; %g requests/s evenly spaced; the service time ×%g from %v to %v; every attempt times out after %v. Recovery: from the drop's end to the first second from which ≥ 90%% of requests succeed; peak: the busiest second's arrivals ÷ the offered rate.\n\n",
			s.Workers, s.Service, s.Rate, s.Factor, s.Before, s.Before+s.Drop, s.Timeout)
		fmt.Fprintf(w, "| candidate | sent | succeeded | recovery | peak arrivals | arrivals per second |\n|---|---:|---:|---:|---:|---|\n")
		for _, r := range s.Rows {
			fmt.Fprintf(w, "| %s | %d | %d | %v | %.2f× | %v |\n", r.Name, r.Sent, r.OK, r.Recovery, r.Peak, r.PerSec)
		}
	}
}

func writeFleetRows(w io.Writer, rows []FleetRow) {
	fmt.Fprintf(w, "| clients × rate | candidate | requests | server attempts | per request | success | errors |\n|---|---|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		fmt.Fprintf(w, "| %d × %g/s | %s | %d | %d | %.3f | %.2f%% | %d |\n", r.Shape.Clients, r.Shape.PerClient, r.Name, r.Requests, r.Server, r.PerRequest, 100*r.Success, r.Errors)
	}
}

// The fleet targets of issues #28 and #37.
const (
	fleetMaxPerRequest = 1.15  // outage, 1 to 500 clients, gotry defaults (issue #28)
	fleetMaxFewClients = 1.05  // outage, 1 to 100 clients, gotry defaults (issue #37)
	fleetMinSuccess    = 0.999 // 5% random 503s, fleets and chain
	chainMaxPerRequest = 1.2   // leaf arrivals per top-level request, leaf down (issue #38; #28 asked 1.5)
	slowMaxPeak        = 1.2   // slow host: busiest second's arrivals ÷ offered
)

func (res *FleetResult) goals() []goal {
	var gs []goal
	for _, r := range res.Outage {
		if r.Name != fleetCandidates[0].name {
			continue
		}
		if r.Shape.Clients <= 100 {
			gs = append(gs, goal{fmt.Sprintf("fleet outage, %d × %g/s: ≤ %.2f attempts per request", r.Shape.Clients, r.Shape.PerClient, fleetMaxFewClients),
				fmt.Sprintf("%.3f", r.PerRequest), r.PerRequest <= fleetMaxFewClients})
		}
		if r.Shape.Clients <= 500 {
			gs = append(gs, goal{fmt.Sprintf("fleet outage, %d × %g/s: ≤ %.2f attempts per request", r.Shape.Clients, r.Shape.PerClient, fleetMaxPerRequest),
				fmt.Sprintf("%.3f", r.PerRequest), r.PerRequest <= fleetMaxPerRequest})
		}
		bound := fleetBound(r.Requests, int64(r.Shape.Clients))
		gs = append(gs, goal{fmt.Sprintf("fleet outage, %d × %g/s: within the budget's fleet bound (requests + clients × reserve)", r.Shape.Clients, r.Shape.PerClient),
			fmt.Sprintf("%d attempts, bound %d (%.3f a request)", r.Server, bound, float64(bound)/float64(max(r.Requests, 1))), r.Server <= bound})
	}
	for _, r := range res.Flaky {
		if r.Name == fleetCandidates[0].name {
			gs = append(gs, goal{fmt.Sprintf("fleet, 5%% 503s, %d × %g/s: ≥ %.1f%% succeed", r.Shape.Clients, r.Shape.PerClient, 100*fleetMinSuccess),
				fmt.Sprintf("%.2f%%", 100*r.Success), r.Success >= fleetMinSuccess})
		}
	}
	if c := res.Chain; c != nil {
		for _, r := range c.Rows {
			if r.Name != chainSetups[0].name {
				continue
			}
			if r.Leaf == "down" {
				gs = append(gs, goal{fmt.Sprintf("chain at %g/s, leaf down: ≤ %.1f leaf arrivals per request", r.Rate, chainMaxPerRequest),
					fmt.Sprintf("%.3f", r.PerRequest), r.PerRequest <= chainMaxPerRequest})
			} else {
				gs = append(gs, goal{fmt.Sprintf("chain at %g/s, 5%% leaf 503s: ≥ %.1f%% succeed", r.Rate, 100*fleetMinSuccess),
					fmt.Sprintf("%.2f%%", 100*r.Success), r.Success >= fleetMinSuccess})
			}
		}
	}
	if s := res.Slow; s != nil && len(s.Rows) > 1 {
		none, g := s.Rows[0], s.Rows[1]
		gs = append(gs, goal{"slow host, defaults: recovery no slower than no retries",
			fmt.Sprintf("%v vs %v", g.Recovery, none.Recovery), g.Recovery <= none.Recovery})
		gs = append(gs, goal{fmt.Sprintf("slow host, defaults: peak arrivals ≤ %.1f× offered", slowMaxPeak),
			fmt.Sprintf("%.2f×", g.Peak), g.Peak <= slowMaxPeak})
	}
	return gs
}
