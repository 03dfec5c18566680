package bench

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
)

// The ladder of issue #37: what a retry budget costs the job when failures
// are independent and partial. Every attempt is answered 503 with
// probability p, independently of every other, so a client with 3 attempts
// and no budget succeeds for 1 − p³ of its requests. The ladder climbs p
// (10%, 20%, 30%) at two shapes of the same 100 requests a second: one busy
// client, and 100 quiet replicas at 1 a second each. Its other side is the
// outage (every answer 503) at the same shapes and at fleets of 500 and
// 1,000 quiet replicas: what the budget stops. A budget is judged on both
// in the same run (STYLE.md, rule 18).

// ladderShares are the failure probabilities of the table.
var ladderShares = []float64{0.10, 0.20, 0.30}

// ladderShapes are 100 requests a second in all: one busy client, and 100
// quiet replicas.
var ladderShapes = []FleetShape{{1, 100}, {100, 1}}

// ladderOutageShapes are the outage's: the ladder's two shapes and the
// issue's larger fleets of quiet replicas.
var ladderOutageShapes = []FleetShape{{1, 100}, {100, 1}, {500, 1}, {1000, 1}}

// ladderAttempts is every retrying candidate's attempts per request: gotry's
// default, so the ideal 1 − p³ is every candidate's.
const ladderAttempts = transport.DefaultMaxAttempts

// ladderSeed seeds the servers' draws; round r, cell c draw from
// ladderSeed + 1000 r + c, every candidate of a cell from the same seed.
const ladderSeed = 0x1add3737

// ladderCandidates: no retries, then the fleet scenario's candidates, built
// the same way (gotry: transport.New(base), no options; failsafe-go: its
// retry policy with budget.New(); go-retryablehttp: both with
// peerFleetRetry, 3 attempts and a 10ms constant backoff).
var ladderCandidates = append([]fleetCandidate{
	{"no retries", func(b http.RoundTripper) http.RoundTripper { return b }},
}, fleetCandidates...)

// failsAt reports whether arrival n (from 1) at a server seeded seed fails,
// with probability p. Arrival n draws from its own stream, as the
// random-latency scenarios' arrivals do, so every candidate of a cell meets
// the same sequence of answers, arrival by arrival, however its attempts
// interleave; p = 1 fails every arrival.
func failsAt(seed uint64, n int64, p float64) bool {
	s := stream{state: seed ^ uint64(n)*0x9e3779b97f4a7c15}
	return s.float() < p
}

// ladderServer is a loopback server that answers each arrival 503 with
// probability p (failsAt), else 200 with a small body, and counts arrivals.
type ladderServer struct {
	srv      *httptest.Server
	arrivals atomic.Int64
}

func newLadderServer(seed uint64, p float64) *ladderServer {
	s := &ladderServer{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if failsAt(seed, s.arrivals.Add(1), p) {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, "unavailable") // a client that went away cannot be told
			return
		}
		_, _ = io.WriteString(w, "ok") // a client that went away cannot be told
	}))
	return s
}

// LadderRow is one candidate in one cell, summed over the rounds.
type LadderRow struct {
	Name             string
	Requests, Server int64 // sent by the clients, received by the server
	OK               int64 // 200 with no error
	Errors           int64 // requests that ended with an error instead of an answer
	Success          float64
	PerRequest       float64   // server arrivals ÷ requests
	Rounds           []float64 // success of each round, in round order
	// Refused counts the retries gotry's budget refused (gotry only): a
	// request short of the ideal with none refused met the dice, not the
	// budget.
	Refused int64
}

// LadderCell is one failure probability at one shape.
type LadderCell struct {
	Shape FleetShape
	P     float64
	Ideal float64 // 1 − p^ladderAttempts
	Rows  []LadderRow
}

// LadderOutageRow is gotry's defaults at one shape through an outage.
type LadderOutageRow struct {
	Shape            FleetShape
	Requests, Server int64
	OK               int64
	PerRequest       float64
	// Bound is the most attempts the fleet may send by the budget's
	// bound: every client's budgetBound of its share of the requests.
	Bound int64
}

// LadderResult is the ladder's tables.
type LadderResult struct {
	Cell   time.Duration
	Rounds int
	Cells  []LadderCell
	Outage []LadderOutageRow
}

// runLadder runs every cell Rounds times, every candidate of a cell side by
// side, each on a server of its own with the cell's seed; then the outage,
// once per shape, one shape after the other.
func runLadder(cfg *Config) (*LadderResult, error) {
	res := &LadderResult{Cell: cfg.LadderCell, Rounds: cfg.Rounds}
	for _, sh := range ladderShapes {
		for _, p := range ladderShares {
			c := LadderCell{Shape: sh, P: p, Ideal: 1 - math.Pow(p, ladderAttempts), Rows: make([]LadderRow, len(ladderCandidates))}
			for i, lc := range ladderCandidates {
				c.Rows[i].Name = lc.name
			}
			res.Cells = append(res.Cells, c)
		}
	}
	for r := range res.Rounds {
		for ci := range res.Cells {
			c := &res.Cells[ci]
			cfg.progress("ladder: round %d/%d, %d × %g/s, p = %.0f%%", r+1, res.Rounds, c.Shape.Clients, c.Shape.PerClient, 100*c.P)
			seed := uint64(ladderSeed + 1000*r + ci)
			var wg sync.WaitGroup
			got := make([]FleetRow, len(ladderCandidates))
			refused := make([]int64, len(ladderCandidates))
			for i, lc := range ladderCandidates {
				wg.Go(func() { got[i], refused[i] = ladderRun(lc, c.Shape, seed, c.P, cfg.LadderCell) })
			}
			wg.Wait()
			for i, g := range got {
				row := &c.Rows[i]
				row.Refused += refused[i]
				row.Requests += g.Requests
				row.Server += g.Server
				row.OK += g.OK
				row.Errors += g.Errors
				row.Rounds = append(row.Rounds, g.Success)
			}
		}
	}
	for ci := range res.Cells {
		for i := range res.Cells[ci].Rows {
			row := &res.Cells[ci].Rows[i]
			row.Success = float64(row.OK) / float64(max(row.Requests, 1))
			row.PerRequest = float64(row.Server) / float64(max(row.Requests, 1))
		}
	}
	gotry := ladderCandidates[1]
	for si, sh := range ladderOutageShapes {
		cfg.progress("ladder outage: %d × %g/s, gotry defaults", sh.Clients, sh.PerClient)
		g, _ := ladderRun(gotry, sh, uint64(ladderSeed+si), 1, cfg.LadderCell)
		res.Outage = append(res.Outage, LadderOutageRow{Shape: sh, Requests: g.Requests, Server: g.Server, OK: g.OK,
			PerRequest: g.PerRequest, Bound: fleetBound(g.Requests, int64(sh.Clients))})
	}
	return res, nil
}

// ladderRun offers shape's requests for d through candidate c, each client
// its own RoundTripper over one shared base (as the fleet scenario's), to a
// ladder server of its own. For gotry's defaults it also counts the
// retries the budget refused (a hook, which changes no decision).
func ladderRun(c fleetCandidate, sh FleetShape, seed uint64, p float64, d time.Duration) (FleetRow, int64) {
	s := newLadderServer(seed, p)
	defer s.srv.Close()
	base := newLoopbackBase()
	defer base.CloseIdleConnections()
	var refused atomic.Int64
	newRT := c.new
	if c.name == fleetCandidates[0].name {
		hooks := transport.WithHooks(transport.Hooks{OnBudgetExhausted: func(resilience.BudgetEvent) { refused.Add(1) }})
		newRT = func(b http.RoundTripper) http.RoundTripper { return transport.New(b, hooks) }
	}
	clients := make([]*http.Client, sh.Clients)
	for i := range clients {
		clients[i] = &http.Client{Transport: newRT(base)}
	}
	sent, ok, errs := fleetLoop(clients, s.srv.URL, sh.PerClient, d)
	srv := s.arrivals.Load()
	return FleetRow{Name: c.name, Shape: sh, Requests: sent, Server: srv, OK: ok, Errors: errs,
		PerRequest: float64(srv) / float64(max(sent, 1)), Success: float64(ok) / float64(max(sent, 1))}, refused.Load()
}

func (res *LadderResult) write(w io.Writer) {
	fmt.Fprintf(w, "\n### Independent failures: the ladder of issue #37\n\n")
	fmt.Fprintf(w, "Every attempt is answered 503 with probability p, independently (a seeded draw per arrival at the server, the same sequence for every candidate), else 200 with a 2-byte body. "+
		"GETs, evenly spaced, 100 requests/s in all: one client at 100/s, or 100 quiet clients at 1/s each (each its own transport and retry state over one shared connection pool), "+
		"%v a cell, %d round(s) pooled; in every cell the candidates run side by side, each on a server of its own. "+
		"gotry: `transport.New(base)`, defaults (%d attempts, full-jitter backoff from 100ms, the default budget). "+
		"failsafe-go: failsafehttp's retry policy, %d attempts, %v constant delay, `budget.New()` at its defaults, one per client. "+
		"go-retryablehttp: RetryMax %d (%d attempts), %v constant backoff (its defaults, 4 retries and 1–30s backoff, would make the run minutes long). "+
		"A request succeeds when its answer is a 200; go-retryablehttp reports giving up as an error instead of the last 503, and either is a failure. "+
		"Each figure: success (attempts per request at the server)",
		res.Cell, res.Rounds, transport.DefaultMaxAttempts, peerFleetRetry.attempts, peerFleetRetry.backoff,
		peerFleetRetry.attempts-1, peerFleetRetry.attempts, peerFleetRetry.backoff)
	if res.Rounds > 1 {
		fmt.Fprintf(w, "; in brackets, the range of success over the rounds")
	}
	fmt.Fprintf(w, ". Ideal: 1 − p³, what %d attempts with no budget achieve on average. "+
		"The last column counts the retries gotry's budget refused (a hook counts them): with none refused, a shortfall against the ideal is the draws', not the budget's.\n\n", ladderAttempts)
	fmt.Fprintf(w, "| clients × rate | p | requests | ideal 1 − p³ |")
	for _, c := range ladderCandidates {
		fmt.Fprintf(w, " %s |", c.name)
	}
	fmt.Fprintf(w, " retries gotry's budget refused |")
	fmt.Fprintf(w, "\n|---|---:|---:|---:|")
	for range ladderCandidates {
		fmt.Fprintf(w, "---:|")
	}
	fmt.Fprintf(w, "---:|")
	fmt.Fprintln(w)
	for _, c := range res.Cells {
		fmt.Fprintf(w, "| %d × %g/s | %.0f%% | %d | %.2f%% |", c.Shape.Clients, c.Shape.PerClient, 100*c.P, c.Rows[0].Requests, 100*c.Ideal)
		for _, r := range c.Rows {
			fmt.Fprintf(w, " %.2f%%", 100*r.Success)
			if len(r.Rounds) > 1 {
				fmt.Fprintf(w, " [%.1f–%.1f]", 100*slices.Min(r.Rounds), 100*slices.Max(r.Rounds))
			}
			fmt.Fprintf(w, " (%.2f) |", r.PerRequest)
		}
		fmt.Fprintf(w, " %d |", c.Rows[1].Refused)
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "\nThe other side: an outage (every answer 503) for %v, gotry defaults, the same schedule. "+
		"The bound is the most the budget lets a fleet send when nothing succeeds (nothing is deposited, refunded or refilled): each client its requests plus its reserve of %d, and at most %d attempts a request.\n\n",
		res.Cell, transport.DefaultBudgetReserve, transport.DefaultMaxAttempts)
	fmt.Fprintf(w, "| clients × rate | requests | server attempts | attempts per request | fleet bound | bound per request |\n|---|---:|---:|---:|---:|---:|\n")
	for _, r := range res.Outage {
		fmt.Fprintf(w, "| %d × %g/s | %d | %d | %.3f | %d | %.3f |\n", r.Shape.Clients, r.Shape.PerClient, r.Requests, r.Server, r.PerRequest,
			r.Bound, float64(r.Bound)/float64(max(r.Requests, 1)))
	}
}

// ladderSigmas is how many binomial standard errors below the ideal a
// cell's success may fall and still meet its goal: the cells are a few
// hundred to a few thousand requests, and 3 standard errors keep a budget
// that costs nothing from failing by chance (about 1 run in 700 a cell).
const ladderSigmas = 3

// goals: in every cell, gotry's defaults come within ladderSigmas standard
// errors of what the budget's doc promises: the ideal, what retrying
// without a budget achieves, for a busy client; for a quiet one (fewer
// calls a second than reserve ÷ ratio, which lives on its reserve) the
// ideal less about p⁴, the requests that fail after one whose attempts all
// failed spent the reserve, which a client that sees one request a second
// cannot tell from an outage's. A busy client's budget refuses no retry up
// to p = 20%.
func (res *LadderResult) goals() []goal {
	var gs []goal
	for _, c := range res.Cells {
		g := c.Rows[1]
		want, of := c.Ideal, "1 − p³"
		if c.Shape.PerClient < float64(transport.DefaultBudgetReserve)/transport.DefaultBudgetRatio {
			want, of = c.Ideal-math.Pow(c.P, ladderAttempts+1), "1 − p³ − p⁴"
		}
		if c.Shape.Clients == 1 && c.P <= 0.2 {
			gs = append(gs, goal{fmt.Sprintf("ladder, %d × %g/s, %.0f%% independent 503s: gotry's budget refuses no retry", c.Shape.Clients, c.Shape.PerClient, 100*c.P),
				fmt.Sprintf("%d refused", g.Refused), g.Refused == 0})
		}
		floor := want - ladderSigmas*math.Sqrt(want*(1-want)/float64(max(g.Requests, 1)))
		gs = append(gs, goal{fmt.Sprintf("ladder, %d × %g/s, %.0f%% independent 503s: gotry defaults succeed for ≥ %s less %d standard errors",
			c.Shape.Clients, c.Shape.PerClient, 100*c.P, of, ladderSigmas),
			fmt.Sprintf("%.2f%% (≥ %.2f%%; ideal %.2f%%)", 100*g.Success, 100*floor, 100*c.Ideal), g.Success >= floor})
	}
	for _, r := range res.Outage {
		gs = append(gs, goal{fmt.Sprintf("ladder outage, %d × %g/s: gotry defaults within the budget's fleet bound", r.Shape.Clients, r.Shape.PerClient),
			fmt.Sprintf("%.3f attempts a request (bound %.3f)", r.PerRequest, float64(r.Bound)/float64(max(r.Requests, 1))), r.Server <= r.Bound})
	}
	return gs
}
