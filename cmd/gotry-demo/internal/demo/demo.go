package demo

// This file is over 400 lines because it is the demo's wiring: its Config,
// Run (upstream, telemetry, transports, traffic and view, one after
// another), the metrics server and the summary; what each piece does lives
// in the file named for it.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/telemetry"
	"github.com/MrVSiK/gotry/transport"
)

// Config is one demo run. DefaultConfig gives the values `make demo` uses;
// the zero value is not valid.
type Config struct {
	// Duration is how long traffic runs; 0 runs until ctx ends.
	Duration time.Duration
	// Rate is the offered load in requests per second, spread over the
	// targets; Concurrency bounds the requests in flight.
	Rate        float64
	Concurrency int
	// RequestTimeout bounds each request, retries and sleeps included.
	RequestTimeout time.Duration
	// Seed makes the upstream's faults and the request mix repeatable.
	Seed uint64

	// Faults, Outage, Burst and Drop shape the embedded upstream; Hosts
	// names its virtual hosts (default DefaultHosts()).
	Faults Faults
	Outage Outage
	Burst  Burst
	Drop   Drop
	Hosts  []string
	// UpstreamListen is where the embedded upstream listens (default
	// 127.0.0.1:0, see UpstreamConfig.Listen).
	UpstreamListen string
	// Targets, when set, replaces the embedded upstream: the load GETs these
	// URLs instead.
	Targets []string

	// The transport under test.
	MaxAttempts int
	BackoffBase time.Duration
	BackoffMax  time.Duration
	HedgeDelay  time.Duration // 0 turns hedging off
	MaxHedges   int
	// AdaptiveHosts are hedged by adaptive hedging (the delay learned per
	// host, at most HedgeMaxExtraLoad of their requests hedged, the delay
	// capped at 2×HedgeDelay); the other hosts after HedgeDelay. Empty, or a
	// HedgeMaxExtraLoad of 0, hedges every host after HedgeDelay.
	AdaptiveHosts     []string
	HedgeMaxExtraLoad float64
	PerAttemptTimeout time.Duration
	BudgetRatio       float64
	BudgetReserve     int
	BreakerThreshold  int
	BreakerOpenFor    time.Duration
	// LimitHosts are under the transport's adaptive concurrency limit
	// (transport.WithConcurrencyLimit, its defaults); the other hosts'
	// requests are exempt (Policy.NoLimit), so their outage and brownout
	// stay the breaker's and the budget's story. Empty turns the limit off.
	LimitHosts []string

	// MetricsAddr is where /metrics is served (port 0: random).
	MetricsAddr string
	// OTLPTraces and OTLPMetrics turn on OTLP/HTTP export, configured by the
	// standard OTEL_EXPORTER_OTLP_* variables (see OTLPFromEnv).
	OTLPTraces, OTLPMetrics bool
	// MetricExportInterval overrides OTEL_METRIC_EXPORT_INTERVAL when > 0.
	MetricExportInterval time.Duration

	// Out receives the view; Live redraws it in place with ANSI codes,
	// otherwise it prints a line per Refresh. Width bounds long lines.
	Out     io.Writer
	Live    bool
	Width   int
	Height  int // rows of the terminal; 0: unknown. The live frame is cut to fit.
	Refresh time.Duration
	// WaterfallEvery is how often a waterfall of a recent retried or hedged
	// request is shown; 0 shows only the final one.
	WaterfallEvery time.Duration
	// LogOutput, when set, receives every zap line at LogLevel and above as
	// JSON; the view always shows warnings, errors and breaker moves.
	LogOutput io.Writer
	LogLevel  zapcore.Level
	// OtelErrors installs an otel error handler that logs OpenTelemetry
	// errors (failed exports, say) instead of printing them over the view.
	// It sets a process-wide handler: for main only.
	OtelErrors bool

	// AfterTraffic, when set, is called once traffic has stopped and every
	// request has finished, before anything shuts down (tests scrape
	// /metrics there).
	AfterTraffic func(Endpoints)
}

// Endpoints are the addresses of a running demo.
type Endpoints struct {
	MetricsURL string
	Upstream   []Host
}

// DefaultConfig returns the configuration of `make demo`: 60s of 50 req/s
// over four hosts (checkout a service calling payments) with the default faults, payments down 10s every 40s,
// search's capacity down to 10 req/s for 10s every 60s, and a transport with
// 4 attempts, hedging at 80ms (search adaptively, at most 5% extra load), a
// 1s per-attempt timeout, the budget, a breaker that opens for 5s and a
// concurrency limit on search.
func DefaultConfig() Config {
	return Config{
		Duration:          60 * time.Second,
		Rate:              50,
		Concurrency:       32,
		RequestTimeout:    5 * time.Second,
		Seed:              1,
		Faults:            DefaultFaults(),
		Outage:            DefaultOutage(),
		Burst:             DefaultBurst(),
		Drop:              DefaultDrop(),
		MaxAttempts:       4,
		BackoffBase:       50 * time.Millisecond,
		BackoffMax:        time.Second,
		HedgeDelay:        80 * time.Millisecond,
		MaxHedges:         1,
		AdaptiveHosts:     []string{"search"},
		HedgeMaxExtraLoad: 0.05,
		PerAttemptTimeout: time.Second,
		// Tighter than resilience.DefaultBudgetRatio (0.25): at the
		// burst's 30% of failing attempts the retries that fail (0.12 a
		// successful request) outrun 0.1, so the budget refuses some and
		// its panels and alert have data; the default pays them all.
		BudgetRatio:      0.1,
		BudgetReserve:    transport.DefaultBudgetReserve,
		BreakerThreshold: 5,
		BreakerOpenFor:   5 * time.Second,
		LimitHosts:       []string{"search"},
		MetricsAddr:      "127.0.0.1:9464",
		Out:              os.Stdout,
		Width:            120,
		Refresh:          time.Second,
		WaterfallEvery:   10 * time.Second,
		LogLevel:         zapcore.InfoLevel,
	}
}

func (c *Config) validate() error {
	switch {
	case c.Duration < 0:
		return fmt.Errorf("demo: duration must not be negative, got %v", c.Duration)
	case math.IsNaN(c.Rate) || c.Rate <= 0:
		return fmt.Errorf("demo: rate must be positive, got %v", c.Rate)
	case c.Concurrency < 1:
		return fmt.Errorf("demo: concurrency must be at least 1, got %d", c.Concurrency)
	case c.RequestTimeout <= 0:
		return fmt.Errorf("demo: request timeout must be positive, got %v", c.RequestTimeout)
	case c.Refresh <= 0:
		return fmt.Errorf("demo: refresh must be positive, got %v", c.Refresh)
	case c.WaterfallEvery < 0:
		return fmt.Errorf("demo: waterfall interval must not be negative, got %v", c.WaterfallEvery)
	case math.IsNaN(c.HedgeMaxExtraLoad) || c.HedgeMaxExtraLoad < 0 || c.HedgeMaxExtraLoad >= 1:
		return fmt.Errorf("demo: hedge max extra load must be in [0, 1), got %v", c.HedgeMaxExtraLoad)
	case c.MaxAttempts < 1, c.MaxHedges < 0, c.HedgeDelay < 0, c.PerAttemptTimeout < 0,
		c.BackoffBase < 0, c.BackoffMax < c.BackoffBase, c.BudgetReserve < 0, c.BudgetReserve > 1000, c.BudgetRatio < 0,
		c.BreakerThreshold < 0, c.BreakerOpenFor < 0:
		return errors.New("demo: invalid transport settings (attempts >= 1, no negative values, backoff max >= base)")
	case c.Out == nil:
		return errors.New("demo: Out must be set")
	}
	if err := c.Faults.validate(); err != nil {
		return err
	}
	if err := c.Outage.validate(); err != nil {
		return err
	}
	if err := c.Drop.validate(); err != nil {
		return err
	}
	return c.Burst.validate()
}

// Summary is the outcome of a run.
type Summary struct {
	Elapsed   time.Duration
	Counters  Counters
	P50, P99  time.Duration
	Breakers  []BreakerRow
	Limits    []LimitRow                  // one per Config.LimitHosts
	Served    map[string]map[string]int64 // by host and fault; nil with Targets
	Seen      map[string]int64            // attempts the upstream saw, by the kind AttemptHeader names; nil with Targets
	Waterfall []string                    // the run's most interesting request
}

// Run runs the demo until cfg.Duration passes or ctx ends: it starts the
// upstream, the metrics endpoint and the traffic, draws the view, then stops
// the traffic, waits for every request, prints a summary and a waterfall,
// and shuts everything down (flushing OTLP). Every goroutine it starts has
// ended when it returns.
func Run(ctx context.Context, cfg Config) (sum Summary, err error) {
	if err := cfg.validate(); err != nil {
		return sum, err
	}
	shutdownCtx := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	}

	ring := newLogRing(64)
	logger := newLogger(&cfg, ring)
	defer func() { _ = logger.Sync() }()
	if cfg.OtelErrors {
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { logger.Warn("otel: " + err.Error()) }))
	}

	rec := newSpanRecorder(0)
	prov, err := newProviders(ctx, &cfg, rec)
	if err != nil {
		return sum, err
	}
	defer func() {
		sctx, cancel := shutdownCtx()
		defer cancel()
		err = errors.Join(err, prov.shutdown(sctx))
	}()

	// The upstream, or the given targets.
	var (
		up      *Upstream
		targets []target
		dial    func(context.Context, string, string) (net.Conn, error)
		hosts   []string
	)
	if len(cfg.Targets) > 0 {
		if targets, err = urlTargets(cfg.Targets); err != nil {
			return sum, err
		}
		dial = (&net.Dialer{Timeout: 5 * time.Second}).DialContext
	} else {
		up, err = StartUpstream(UpstreamConfig{Listen: cfg.UpstreamListen, Hosts: cfg.Hosts, Faults: cfg.Faults,
			Outage: cfg.Outage, Burst: cfg.Burst, Drop: cfg.Drop, Seed: cfg.Seed, TracerProvider: prov.upstreamTP})
		if err != nil {
			return sum, err
		}
		defer func() {
			sctx, cancel := shutdownCtx()
			defer cancel()
			err = errors.Join(err, up.Shutdown(sctx))
		}()
		for _, h := range up.Hosts() {
			hosts = append(hosts, h.Name)
		}
		targets = demoTargets(hosts)
		dial = up.DialContext
	}
	fixedHedges(&cfg, targets)
	limitOnly(&cfg, targets)
	if hosts == nil {
		for _, t := range targets {
			hosts = append(hosts, t.host)
		}
	}

	ms, err := serveMetrics(cfg.MetricsAddr, metricsMux(prov))
	if err != nil {
		return sum, err
	}
	defer func() {
		sctx, cancel := shutdownCtx()
		defer cancel()
		ms.shutdown(sctx)
	}()
	ep := Endpoints{MetricsURL: ms.url}
	if up != nil {
		ep.Upstream = up.Hosts()
	}

	// The transport under test, with full telemetry and the demo's counters.
	base := &http.Transport{
		DialContext:         dial,
		MaxIdleConns:        4 * cfg.Concurrency,
		MaxIdleConnsPerHost: 2 * cfg.Concurrency,
		IdleConnTimeout:     30 * time.Second,
	}
	defer base.CloseIdleConnections()
	tel := telemetry.New(
		telemetry.WithTracerProvider(prov.tp),
		telemetry.WithMeterProvider(prov.mp),
		telemetry.WithPropagators(propagation.TraceContext{}),
		telemetry.WithLogger(logger),
	)
	st := newStats(cfg.LimitHosts)
	tr := newTransport(&cfg, base, tel.Transport(telemetry.Name("demo")),
		transport.WithHooks(st.hooks()), transport.WithHooks(rec.hooks()))

	v := &view{out: cfg.Out, live: cfg.Live, width: cfg.Width, height: cfg.Height, outage: cfg.Outage, duration: cfg.Duration,
		logs: ring, header: headerLines(&cfg, ep, prov.serviceName)}
	if !v.live {
		for _, l := range v.header {
			fmt.Fprintln(v.out, l)
		}
	} else {
		v.wfTitle = "waterfall: waiting for a retried or hedged request"
	}

	// Traffic.
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	if cfg.Duration > 0 {
		runCtx, stop = context.WithTimeout(ctx, cfg.Duration)
		defer stop()
	}
	ld := &load{client: &http.Client{Transport: tr}, targets: targets, rate: cfg.Rate,
		concurrency: cfg.Concurrency, timeout: cfg.RequestTimeout, stats: st, seed: cfg.Seed}
	start := time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		ld.run(runCtx)
	}()

	takeSample := func(now time.Time) sample {
		stats := tr.Stats()
		for _, h := range hosts {
			hs, _ := stats.Host(h)
			st.observeBreaker(h, hs.Breaker, now)
		}
		recent := st.latency.recent(now)
		s := sample{now: now, elapsed: now.Sub(start), c: st.snapshot(), tokens: stats.BudgetTokens,
			p50: recent.quantile(0.5), p99: recent.quantile(0.99), breakers: st.breakerRows(hosts, now)}
		for _, h := range cfg.LimitHosts {
			hs, _ := stats.Host(h)
			lr := LimitRow{Host: h, Limit: hs.Limit, InFlight: hs.InFlight, Shed: int64(hs.Shed), OK: st.okFor(h)}
			if up != nil {
				lr.DropNow = up.DropActive(h, now)
			}
			s.limits = append(s.limits, lr)
		}
		if up != nil {
			s.served = up.servedTotals()
			s.outageNow = up.OutageActive(cfg.Outage.Host, now)
		}
		return s
	}
	barW := min(max(cfg.Width-70, 20), 60)

	tick := time.NewTicker(cfg.Refresh)
	defer tick.Stop()
	lastWF := start
	v.draw(takeSample(start))
	stopping := runCtx.Done()
loop:
	for {
		select {
		case <-done:
			break loop
		case <-stopping:
			stopping = nil
			v.stop()
		case now := <-tick.C:
			if cfg.WaterfallEvery > 0 && now.Sub(lastWF) >= cfg.WaterfallEvery {
				lastWF = now
				if tv, ok := rec.pickRecent(now, cfg.WaterfallEvery, 300*time.Millisecond); ok {
					v.setWaterfall(fmt.Sprintf("waterfall: the request with the most attempts in the last %s (at %s)",
						cfg.WaterfallEvery, fmtElapsed(now.Sub(start))), renderWaterfall(tv, barW))
				}
			}
			v.draw(takeSample(now))
		}
	}
	end := time.Now()
	final := takeSample(end)
	v.final = true
	v.draw(final)
	v.close()
	if cfg.AfterTraffic != nil {
		cfg.AfterTraffic(ep)
	}

	total := st.latency.total()
	sum = Summary{Elapsed: end.Sub(start), Counters: final.c, P50: total.quantile(0.5), P99: total.quantile(0.99),
		Breakers: final.breakers, Limits: final.limits}
	if tv, ok := rec.pickBest(); ok {
		sum.Waterfall = renderWaterfall(tv, barW)
	}
	if up != nil {
		sum.Served = up.Served()
		sum.Seen = up.Seen()
	}
	printSummary(cfg.Out, &sum, final)
	return sum, nil
}

// newLogger returns the demo's zap logger: every line the view is about
// goes to ring, and every line at cfg.LogLevel to cfg.LogOutput as JSON.
func newLogger(cfg *Config, ring *logRing) *zap.Logger {
	cores := []zapcore.Core{ringCore{ring: ring}}
	if cfg.LogOutput != nil {
		enc := zap.NewProductionEncoderConfig()
		enc.EncodeTime = zapcore.ISO8601TimeEncoder
		cores = append(cores, zapcore.NewCore(zapcore.NewJSONEncoder(enc),
			zapcore.Lock(zapcore.AddSync(cfg.LogOutput)), cfg.LogLevel))
	}
	return zap.New(zapcore.NewTee(cores...))
}

// newTransport builds the transport under test from cfg, observed as the
// options in observe say (each hook set sees every event).
func newTransport(cfg *Config, base http.RoundTripper, observe ...transport.Option) *transport.Transport {
	opts := []transport.Option{
		transport.WithMaxAttempts(cfg.MaxAttempts),
		transport.WithBackoff(resilience.ExponentialJitter(cfg.BackoffBase, cfg.BackoffMax)),
		transport.WithRetryBudget(cfg.BudgetRatio, cfg.BudgetReserve),
		transport.WithPerAttemptTimeout(cfg.PerAttemptTimeout),
		transport.WithAttemptHeader(AttemptHeader),
		transport.WithHopPeers(isHopPeer),
	}
	opts = append(opts, observe...)
	switch {
	case cfg.adaptive():
		// Fixed-delay hosts carry their delay in a Policy (see fixedHedges).
		opts = append(opts, transport.WithAdaptiveHedging(resilience.AdaptiveHedging{
			MaxExtraLoad: cfg.HedgeMaxExtraLoad, MaxDelay: 2 * cfg.HedgeDelay}, cfg.MaxHedges))
	case cfg.HedgeDelay > 0 && cfg.MaxHedges > 0:
		opts = append(opts, transport.WithHedging(cfg.HedgeDelay, cfg.MaxHedges))
	}
	if cfg.BreakerThreshold > 0 {
		opts = append(opts, transport.WithBreaker(resilience.BreakerConfig{
			FailureThreshold: cfg.BreakerThreshold, OpenDuration: cfg.BreakerOpenFor}))
	}
	if len(cfg.LimitHosts) > 0 {
		// The limit learns each host's concurrency from its latency and its
		// 503s, 429s and timeouts. At the demo's load a host has about one
		// request in flight, so the limit starts (and rests) at 4 rather
		// than the default 20: it then fills, and falls, within a second of
		// a capacity drop, before the drop's queue passes the per-attempt
		// timeout and five timeouts in a row open the host's breaker. The
		// hosts not in LimitHosts are exempt per request (see limitOnly).
		opts = append(opts, transport.WithConcurrencyLimit(resilience.ConcurrencyLimit{InitialLimit: 4}))
	}
	return transport.New(base, opts...)
}

// adaptive reports whether some hosts are hedged adaptively.
func (c *Config) adaptive() bool {
	return c.HedgeDelay > 0 && c.MaxHedges > 0 && c.HedgeMaxExtraLoad > 0 && len(c.AdaptiveHosts) > 0
}

// fixedHedges gives the targets of hosts not in cfg.AdaptiveHosts the fixed
// HedgeDelay, when the transport hedges adaptively.
func fixedHedges(cfg *Config, ts []target) {
	if !cfg.adaptive() {
		return
	}
	for i := range ts {
		if !slices.Contains(cfg.AdaptiveHosts, ts[i].host) {
			ts[i].hedgeDelay = cfg.HedgeDelay
		}
	}
}

// limitOnly exempts the targets of hosts not in cfg.LimitHosts from the
// concurrency limit.
func limitOnly(cfg *Config, ts []target) {
	if len(cfg.LimitHosts) == 0 {
		return
	}
	for i := range ts {
		ts[i].noLimit = !slices.Contains(cfg.LimitHosts, ts[i].host)
	}
}

// metricsServer is the /metrics endpoint and the goroutine serving it.
type metricsServer struct {
	srv *http.Server
	url string
	wg  sync.WaitGroup // the Serve goroutine
}

// serveMetrics listens on addr and serves h until shutdown.
func serveMetrics(addr string, h http.Handler) (*metricsServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("demo: metrics listener (pick another address with -metrics-addr, e.g. 127.0.0.1:0): %w", err)
	}
	m := &metricsServer{srv: &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}, url: metricsURL(ln.Addr())}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		_ = m.srv.Serve(ln) // http.ErrServerClosed after shutdown
	}()
	return m, nil
}

// shutdown stops the server, closing it outright if ctx ends first, and
// waits for its goroutine.
func (m *metricsServer) shutdown(ctx context.Context) {
	if err := m.srv.Shutdown(ctx); err != nil {
		m.srv.Close()
	}
	m.wg.Wait()
}

// metricsMux serves the Prometheus registry at /metrics.
func metricsMux(p *providers) *http.ServeMux {
	mux := http.NewServeMux()
	// In OpenMetrics when the scraper asks for it, the format that carries
	// exemplars: the SDK keeps, per histogram bucket, the trace_id and
	// span_id of a sampled request that fell in it, so a latency spike in
	// Grafana links to that request's trace.
	mux.Handle("/metrics", p.mp)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, "gotry demo: metrics at /metrics\n")
	})
	return mux
}

// metricsURL turns the listener's address into a URL a browser can open:
// an unspecified IP becomes 127.0.0.1.
func metricsURL(a net.Addr) string {
	host, port, _ := net.SplitHostPort(a.String())
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/metrics"
}

// headerLines describe the run: load, faults, transport and endpoints.
func headerLines(cfg *Config, ep Endpoints, service string) []string {
	dur := "until Ctrl-C"
	if cfg.Duration > 0 {
		dur = "for " + cfg.Duration.String()
	}
	ls := []string{fmt.Sprintf("gotry demo · %s · %g req/s · %d workers · seed %d", dur, cfg.Rate, cfg.Concurrency, cfg.Seed)}
	if len(ep.Upstream) > 0 {
		var hs []string
		for _, h := range ep.Upstream {
			hs = append(hs, h.Name+"="+h.Addr)
		}
		f := cfg.Faults
		ls = append(ls, fmt.Sprintf("upstream  %s", strings.Join(hs, " ")),
			fmt.Sprintf("faults    503 %g%% · 429+Retry-After %g%% · reset %g%% · slow %g%% (%v+) · hang %g%% (%v)",
				100*f.Unavailable, 100*f.TooMany, 100*f.Reset, 100*f.Slow, f.SlowMin, 100*f.Hang, f.HangFor))
		if o := cfg.Outage; o.Host != "" && o.For > 0 {
			every := "once"
			if o.Every > 0 {
				every = "every " + o.Every.String()
			}
			ls = append(ls, fmt.Sprintf("outage    %s answers 503 for %v, %s, from %v", o.Host, o.For, every, o.Start))
		}
		if b := cfg.Burst; b.Share > 0 && b.For > 0 {
			every := "once"
			if b.Every > 0 {
				every = "every " + b.Every.String()
			}
			ls = append(ls, fmt.Sprintf("burst     every host answers 503 to %g%% for %v, %s, from %v", 100*b.Share, b.For, every, b.Start))
		}
		if d := cfg.Drop; d.Host != "" && d.For > 0 {
			every := "once"
			if d.Every > 0 {
				every = "every " + d.Every.String()
			}
			ls = append(ls, fmt.Sprintf("drop      %s serves %d at a time, %v each (FIFO queue of %d) for %v, %s, from %v",
				d.Host, d.Capacity, d.Service, d.Queue, d.For, every, d.Start))
		}
	} else {
		ls = append(ls, "targets   "+strings.Join(cfg.Targets, " "))
	}
	hedge := "off"
	if cfg.HedgeDelay > 0 && cfg.MaxHedges > 0 {
		hedge = fmt.Sprintf("after %v (max %d)", cfg.HedgeDelay, cfg.MaxHedges)
	}
	if cfg.adaptive() {
		hedge += fmt.Sprintf(", adaptive for %s (≤%g%% extra load)", strings.Join(cfg.AdaptiveHosts, " "), 100*cfg.HedgeMaxExtraLoad)
	}
	limit := "off"
	if len(cfg.LimitHosts) > 0 {
		limit = strings.Join(cfg.LimitHosts, " ")
	}
	ls = append(ls, fmt.Sprintf("transport %d attempts · backoff %v..%v · hedge %s · per-attempt %v · budget %g + reserve %d · breaker %d fails, open %v · limit %s",
		cfg.MaxAttempts, cfg.BackoffBase, cfg.BackoffMax, hedge, cfg.PerAttemptTimeout, cfg.BudgetRatio,
		cfg.BudgetReserve, cfg.BreakerThreshold, cfg.BreakerOpenFor, limit))
	otlp := "OTLP off (set OTEL_EXPORTER_OTLP_ENDPOINT)"
	if cfg.OTLPTraces || cfg.OTLPMetrics {
		var what []string
		if cfg.OTLPTraces {
			what = append(what, "traces")
		}
		if cfg.OTLPMetrics {
			what = append(what, "metrics")
		}
		otlp = fmt.Sprintf("OTLP %s as %s", strings.Join(what, "+"), service)
	}
	ls = append(ls, fmt.Sprintf("metrics   %s · %s", ep.MetricsURL, otlp))
	return ls
}

// printSummary prints the end-of-run report and the waterfall of the run's
// most interesting request.
func printSummary(w io.Writer, s *Summary, final sample) {
	c := s.Counters
	perReq := 0.0
	if c.Requests > 0 {
		perReq = float64(c.Attempts) / float64(c.Requests)
	}
	fmt.Fprintf(w, "\n── summary after %s ──\n", fmtElapsed(s.Elapsed))
	fmt.Fprintf(w, "requests  %d (%.1f/s) · p50 %s · p99 %s · %d ended in an error, %d in a status >= 400\n",
		c.Requests, float64(c.Requests)/max(s.Elapsed.Seconds(), 1e-9), fmtDur(s.P50), fmtDur(s.P99), c.ClientErrors, c.NonOKStatus)
	fmt.Fprintf(w, "attempts  %d (%.2f per request, at most %d) · retries %d (%d after Retry-After) · per-attempt timeouts %d\n",
		c.Attempts, perReq, c.MaxAttempts, c.Retries, c.RetryAfter, c.Timeouts)
	fmt.Fprintf(w, "hedges    %d, won %d · budget refusals %d · breaker rejections %d · skipped %d\n",
		c.Hedges, c.HedgeWins, c.BudgetRefusals, c.BreakerRejects, c.Skipped)
	if n := c.giveUps(); n > 0 {
		fmt.Fprintf(w, "give-ups  %d: %s\n", n, reasons(c.Reasons))
	} else {
		fmt.Fprintln(w, "give-ups  none")
	}
	for i, b := range s.Breakers {
		label := ""
		if i == 0 {
			label = "breakers"
		}
		fmt.Fprintf(w, "%-9s %-10s opened %d× · closed %d× · now %s for %s\n", label, b.Host, b.Opens, b.Closes, stateWord(b.State), fmtElapsed(b.Since))
	}
	if len(s.Limits) > 0 {
		fmt.Fprintf(w, "overload  shed %d initial · %d retry · %d hedge attempts · %d waited for a permit and got one\n",
			c.ShedInitial, c.ShedRetry, c.ShedHedge, c.LimitWaits)
	}
	for i, l := range s.Limits {
		label := ""
		if i == 0 {
			label = "limit"
		}
		fmt.Fprintf(w, "%-9s %-10s shed %d · answered ok %d · limit now %d\n", label, l.Host, l.Shed, l.OK, l.Limit)
	}
	if s.Served != nil {
		fmt.Fprintf(w, "upstream  %s\n", servedLine(final.served))
		fmt.Fprintf(w, "          saw by %s: %d initial · %d retry · %d hedge\n", AttemptHeader,
			s.Seen["initial"], s.Seen["retry"], s.Seen["hedge"])
	}
	if len(s.Waterfall) > 0 {
		fmt.Fprintln(w, "\nwaterfall: the run's request with the most attempts")
		for _, l := range s.Waterfall {
			fmt.Fprintln(w, l)
		}
	}
}
