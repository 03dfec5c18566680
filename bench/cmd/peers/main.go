// Command peers benchmarks gotry side by side with go-retryablehttp,
// failsafe-go, heimdall, otelhttp and hedgedhttp, and prints Markdown tables:
//
//	cd bench && go run ./cmd/peers            # everything, 5 rounds (a few minutes)
//	cd bench && go run ./cmd/peers -quick     # a few seconds, to check it works
//	cd bench && go run ./cmd/peers -only hedging,outage
//	cd bench && go run ./cmd/peers -only overload -overload-capacity 8 -overload-service 10ms
//	cd bench && go run ./cmd/peers -only crowd -crowd-shape fastfail -crowd-clients 5
//	cd bench && go run ./cmd/peers -only ladder -ladder-cell 4s -rounds 1
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/MrVSiK/gotry/bench"
)

func main() {
	var cfg bench.Config
	var only string
	flag.BoolVar(&cfg.Quick, "quick", false, "shrink every scenario to a few seconds in total (checks it works; not for numbers)")
	flag.IntVar(&cfg.Rounds, "rounds", 0, "interleaved rounds per scenario (default 5, or 1 with -quick)")
	flag.StringVar(&only, "only", "", "comma-separated scenarios to run: "+strings.Join(bench.Scenarios, ","))
	flag.IntVar(&cfg.RandomRequests, "random-requests", 0, "randstall, lognormal, bimodal, burst, loadstall, randshift: requests per round (default 2000)")
	flag.DurationVar(&cfg.HedgeDelay, "hedge-delay", 0, "hedge delay of both hedgers (default 10ms)")
	o := &cfg.Overload
	flag.IntVar(&o.Capacity, "overload-capacity", 0, "overload: requests the server serves at once (default 16)")
	flag.DurationVar(&o.Service, "overload-service", 0, "overload: service time of one request (default 5ms)")
	flag.Float64Var(&o.Load, "overload-load", 0, "overload: offered load as a fraction of capacity (default 0.7)")
	flag.Float64Var(&o.Factor, "overload-factor", 0, "overload: service time multiplier during the drop (default 2)")
	flag.DurationVar(&o.Drop, "overload-drop", 0, "overload: length of the drop (default 4s)")
	flag.DurationVar(&o.Deadline, "overload-deadline", 0, "overload: every attempt's timeout (default 100ms)")
	flag.DurationVar(&o.Before, "overload-before", 0, "overload: run time before the drop (default 3s)")
	flag.DurationVar(&o.After, "overload-after", 0, "overload: run time after the drop (default 8s)")
	flag.DurationVar(&o.Steady, "overload-steady", 0, "overload: length of the run without a drop (default 5s)")
	flag.BoolVar(&o.Fixed, "overload-fixed", false, "overload: evenly spaced arrivals instead of Poisson")
	flag.IntVar(&o.Rounds, "overload-rounds", 0, "overload: interleaved rounds (default 3, or 1 with -quick)")
	fl := &cfg.Crowd
	flag.StringVar(&fl.Shape, "crowd-shape", "", "crowd: a preset shape, "+strings.Join(bench.CrowdShapes(), ",")+" (default fleet: 20 clients); the flags below override it")
	flag.IntVar(&fl.Clients, "crowd-clients", 0, "crowd: clients sharing the server (default 20)")
	flag.IntVar(&fl.Capacity, "crowd-capacity", 0, "crowd: requests the server serves at once (default 16)")
	flag.DurationVar(&fl.Service, "crowd-service", 0, "crowd: mean service time (default 10ms)")
	flag.Float64Var(&fl.Load, "crowd-load", 0, "crowd: offered load of all clients, a fraction of capacity (default 0.7)")
	flag.Float64Var(&fl.Factor, "crowd-factor", 0, "crowd: service time multiplier during the drop, 1 for none (default 2)")
	flag.DurationVar(&fl.Deadline, "crowd-deadline", 0, "crowd: every attempt's timeout (default 100ms)")
	flag.StringVar(&fl.Server, "crowd-server", "", "crowd: fifo, or fastfail (503 at once past crowd-queue waiting) (default fifo)")
	flag.IntVar(&fl.Queue, "crowd-queue", 0, "crowd: how many may wait at a fastfail server (default its capacity)")
	flag.StringVar(&fl.Dist, "crowd-dist", "", "crowd: service times fixed, lognormal (σ 1) or pareto (α 1.5) (default fixed)")
	flag.Float64Var(&fl.Burst, "crowd-burst", 0, "crowd: microbursts, arrivals this many times as fast for 50ms of every 500ms (default none)")
	flag.DurationVar(&fl.Before, "crowd-before", 0, "crowd: run time before the drop (default 3s)")
	flag.DurationVar(&fl.Drop, "crowd-drop", 0, "crowd: length of the drop (default 4s)")
	flag.DurationVar(&fl.After, "crowd-after", 0, "crowd: run time after the drop (default 4s)")
	flag.DurationVar(&fl.Steady, "crowd-steady", 0, "crowd: length of the run without a drop (default 5s)")
	flag.IntVar(&fl.Rounds, "crowd-rounds", 0, "crowd: interleaved rounds (default 3, or 1 with -quick)")
	flag.StringVar(&fl.Only, "crowd-only", "", "crowd: run only the candidates whose name contains this, e.g. \"+ limit\" (default all)")
	flag.DurationVar(&cfg.LadderCell, "ladder-cell", 0, "ladder: length of each cell, independent 503s and outage (default 8s, or 500ms with -quick)")
	quiet := flag.Bool("q", false, "no progress lines on stderr")
	flag.Parse()
	if only != "" {
		cfg.Only = strings.Split(only, ",")
	}
	if !*quiet {
		cfg.Progress = os.Stderr
	}
	if _, err := bench.Run(os.Stdout, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "peers:", err)
		os.Exit(1)
	}
}
