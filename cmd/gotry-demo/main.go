// Command gotry-demo shows gotry at work: a flaky upstream on loopback (503s,
// a slow tail, 429 with Retry-After, connection resets, a periodic outage
// of one host and a periodic capacity drop of another), steady traffic
// through a retrying, hedging, circuit-breaking, load-shedding
// transport.Transport with full telemetry, and a live terminal view of what
// the transport does, with span waterfalls of retried and hedged requests.
//
//	go run ./cmd/gotry-demo                 # 60s, live view, /metrics on 127.0.0.1:9464
//	go run ./cmd/gotry-demo -duration 0     # until Ctrl-C
//	OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 go run ./cmd/gotry-demo
//	go run ./cmd/gotry-demo -upstream-only -upstream-listen 127.0.0.1:8081
//	go run ./cmd/gotry-demo -target http://127.0.0.1:8081/,http://127.0.0.1:8082/
//
// Run with -h for every flag. OTLP export (traces and metrics, OTLP/HTTP) is
// on when OTEL_EXPORTER_OTLP_ENDPOINT is set; OTEL_SERVICE_NAME names the
// service (default gotry-demo).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/MrVSiK/gotry/cmd/gotry-demo/internal/demo"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "gotry-demo:", err)
		}
		os.Exit(2)
	}
}

// run parses args and runs the demo (or the bare upstream) until the
// duration passes or SIGINT/SIGTERM arrives. A second signal kills the
// process the default way.
func run(args []string, stdout, stderr io.Writer) (err error) {
	o, err := parse(args, stderr, os.Getenv)
	if err != nil {
		return err
	}
	cfg := o.cfg
	cfg.Out = stdout
	cfg.Live = !o.plain && stdout == io.Writer(os.Stdout) && isTerminal(os.Stdout)
	if cols, rows, ok := termSize(os.Stdout); ok && cfg.Live {
		if !o.widthSet {
			cfg.Width = cols
		}
		cfg.Height = rows
	}
	cfg.OtelErrors = true
	switch o.logFile {
	case "":
	case "-":
		cfg.LogOutput = stderr
	default:
		f, err := os.OpenFile(o.logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		defer func() {
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}()
		cfg.LogOutput = f
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// After the first signal, restore the default handling so a second one
	// kills a shutdown that takes too long.
	context.AfterFunc(ctx, stop)

	if o.upstreamOnly {
		return demo.ServeUpstream(ctx, demo.UpstreamConfig{Listen: cfg.UpstreamListen, Hosts: cfg.Hosts,
			Faults: cfg.Faults, Outage: cfg.Outage, Burst: cfg.Burst, Drop: cfg.Drop, Seed: cfg.Seed}, cfg.Duration, stdout)
	}
	_, err = demo.Run(ctx, cfg)
	return err
}

// options are the parsed command line.
type options struct {
	cfg          demo.Config
	plain        bool
	logFile      string
	upstreamOnly bool
	widthSet     bool // -width was given
}

// parse reads the flags into a demo.Config; OTLP export follows getenv.
func parse(args []string, stderr io.Writer, getenv func(string) string) (options, error) {
	cfg := demo.DefaultConfig()
	fs := flag.NewFlagSet("gotry-demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		o        options
		seed     = fs.Uint64("seed", cfg.Seed, "seed of the fault dice and request mix")
		logLevel = fs.String("log-level", "info", "level of -log-file: debug (every attempt), info (retries too), warn, error")
		targets  = fs.String("target", "", "comma-separated URLs to GET instead of the embedded upstream")
		hosts    = fs.String("hosts", strings.Join(demo.DefaultHosts(), ","), "virtual hosts of the embedded upstream")
	)
	fs.BoolVar(&o.plain, "plain", false, "one line per second instead of the live view (automatic when stdout is not a terminal)")
	fs.StringVar(&o.logFile, "log-file", "", `write every zap line as JSON to this file ("-" for stderr); the view shows warnings, errors and breaker moves either way`)
	fs.BoolVar(&o.upstreamOnly, "upstream-only", false, "run only the flaky upstream (see -upstream-listen) until Ctrl-C or -duration")
	fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "how long to send traffic; 0 runs until Ctrl-C")
	fs.Float64Var(&cfg.Rate, "rate", cfg.Rate, "requests per second, over all hosts")
	fs.IntVar(&cfg.Concurrency, "concurrency", cfg.Concurrency, "requests in flight at most")
	fs.DurationVar(&cfg.RequestTimeout, "request-timeout", cfg.RequestTimeout, "deadline of each request, retries included")
	fs.DurationVar(&cfg.Refresh, "refresh", cfg.Refresh, "view refresh interval")
	fs.DurationVar(&cfg.WaterfallEvery, "waterfall-every", cfg.WaterfallEvery, "show a span waterfall of a recent retried or hedged request this often; 0: only at exit")
	fs.IntVar(&cfg.Width, "width", termWidth(getenv, cfg.Width), "line width of the view (default: the terminal's, else $COLUMNS, else 120)")
	fs.StringVar(&cfg.MetricsAddr, "metrics-addr", cfg.MetricsAddr, "where to serve Prometheus /metrics (port 0: random)")
	fs.StringVar(&cfg.UpstreamListen, "upstream-listen", "127.0.0.1:0", "first upstream host's address; with port P the hosts listen on P, P+1, ...")

	f := &cfg.Faults
	fs.Float64Var(&f.Unavailable, "p503", f.Unavailable, "share of requests answered 503")
	fs.Float64Var(&f.TooMany, "p429", f.TooMany, "share of requests answered 429 with Retry-After: 1")
	fs.Float64Var(&f.Reset, "preset", f.Reset, "share of connections reset (TCP RST)")
	fs.Float64Var(&f.Slow, "pslow", f.Slow, "share of requests in the slow tail")
	fs.DurationVar(&f.SlowMin, "slow", f.SlowMin, "slow-tail latency (uniform up to twice this)")
	fs.Float64Var(&f.Hang, "phang", f.Hang, "share of requests that hang past the per-attempt timeout")
	fs.DurationVar(&f.HangFor, "hang", f.HangFor, "how long a hanging request takes")
	fs.DurationVar(&f.Latency, "latency", f.Latency, "median latency of a normal answer")
	out := &cfg.Outage
	fs.StringVar(&out.Host, "outage-host", out.Host, `host that has periodic outages ("" for none)`)
	fs.DurationVar(&out.Start, "outage-start", out.Start, "first outage this long after start")
	fs.DurationVar(&out.Every, "outage-every", out.Every, "outage period (0: once)")
	fs.DurationVar(&out.For, "outage-for", out.For, "outage length")
	b := &cfg.Burst
	fs.Float64Var(&b.Share, "burst-share", b.Share, "share of requests every host answers 503 during a burst (0: no bursts); drains the retry budget")
	fs.DurationVar(&b.Start, "burst-start", b.Start, "first burst this long after start")
	fs.DurationVar(&b.Every, "burst-every", b.Every, "burst period (0: once)")
	fs.DurationVar(&b.For, "burst-for", b.For, "burst length")
	d := &cfg.Drop
	fs.StringVar(&d.Host, "drop-host", d.Host, `host whose capacity drops periodically ("" for none)`)
	fs.DurationVar(&d.Start, "drop-start", d.Start, "first capacity drop this long after start")
	fs.DurationVar(&d.Every, "drop-every", d.Every, "capacity drop period (0: once)")
	fs.DurationVar(&d.For, "drop-for", d.For, "capacity drop length")
	fs.IntVar(&d.Capacity, "drop-capacity", d.Capacity, "requests the host serves at once during a drop")
	fs.DurationVar(&d.Service, "drop-service", d.Service, "service time of each request during a drop")
	fs.IntVar(&d.Queue, "drop-queue", d.Queue, "requests the host queues (FIFO) during a drop; further ones get 503")

	fs.IntVar(&cfg.MaxAttempts, "attempts", cfg.MaxAttempts, "max attempts per request, retries and hedges included")
	fs.DurationVar(&cfg.BackoffBase, "backoff", cfg.BackoffBase, "base of the full-jitter exponential backoff")
	fs.DurationVar(&cfg.BackoffMax, "backoff-max", cfg.BackoffMax, "cap of the backoff")
	fs.DurationVar(&cfg.HedgeDelay, "hedge-delay", cfg.HedgeDelay, "launch a hedge after this long without an answer; 0 turns hedging off")
	fs.IntVar(&cfg.MaxHedges, "max-hedges", cfg.MaxHedges, "hedges in flight at most")
	adaptive := fs.String("adaptive-hosts", strings.Join(cfg.AdaptiveHosts, ","), "hosts hedged adaptively (the delay learned per host, capped at 2× -hedge-delay); the others after -hedge-delay")
	fs.Float64Var(&cfg.HedgeMaxExtraLoad, "hedge-max-load", cfg.HedgeMaxExtraLoad, "adaptive hedging: the fraction of requests that may get a hedge; 0 hedges every host after -hedge-delay")
	fs.DurationVar(&cfg.PerAttemptTimeout, "attempt-timeout", cfg.PerAttemptTimeout, "per-attempt timeout (until response headers)")
	fs.Float64Var(&cfg.BudgetRatio, "budget-ratio", cfg.BudgetRatio, "retry budget: tokens per successful request (a retry that succeeds is refunded; the library default is 0.25)")
	fs.IntVar(&cfg.BudgetReserve, "budget-reserve", cfg.BudgetReserve, "retry budget: retries held for isolated failures, refilled by successes")
	fs.IntVar(&cfg.BreakerThreshold, "breaker-failures", cfg.BreakerThreshold, "consecutive failures that open a host's breaker; 0 turns the breaker off")
	fs.DurationVar(&cfg.BreakerOpenFor, "breaker-open", cfg.BreakerOpenFor, "how long an open breaker rejects before probing")
	limitHosts := fs.String("limit-hosts", strings.Join(cfg.LimitHosts, ","), `hosts under the adaptive concurrency limit, which sheds what they cannot serve in time ("" turns it off)`)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: gotry-demo [flags]\n\nA live demo of gotry against a flaky loopback upstream. Flags:\n\n")
		fs.PrintDefaults()
		fmt.Fprintf(fs.Output(), "\nEnvironment: OTEL_EXPORTER_OTLP_ENDPOINT (e.g. http://127.0.0.1:4318) turns on OTLP/HTTP export of\ntraces and metrics; OTEL_SERVICE_NAME (default %s) and the other OTEL_* variables apply.\n", demo.DefaultServiceName)
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	fs.Visit(func(f *flag.Flag) { o.widthSet = o.widthSet || f.Name == "width" })
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	cfg.Seed = *seed
	cfg.Hosts = splitList(*hosts)
	cfg.AdaptiveHosts = splitList(*adaptive)
	cfg.LimitHosts = splitList(*limitHosts)
	cfg.Targets = splitList(*targets)
	cfg.OTLPTraces, cfg.OTLPMetrics = demo.OTLPFromEnv(getenv)
	if err := cfg.LogLevel.Set(*logLevel); err != nil {
		return o, fmt.Errorf("-log-level: %w", err)
	}
	o.cfg = cfg
	return o, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// isTerminal reports whether f is a character device (a terminal).
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// termWidth is $COLUMNS when set, else def.
func termWidth(getenv func(string) string, def int) int {
	if n, err := strconv.Atoi(getenv("COLUMNS")); err == nil && n > 40 {
		return n
	}
	return def
}
