// Command peers benchmarks gotry side by side with go-retryablehttp,
// failsafe-go, heimdall, otelhttp and hedgedhttp, and prints Markdown tables:
//
//	cd bench && go run ./cmd/peers            # everything, 5 rounds (a few minutes)
//	cd bench && go run ./cmd/peers -quick     # a few seconds, to check it works
//	cd bench && go run ./cmd/peers -only hedging,outage
//	cd bench && go run ./cmd/peers -only overload -overload-capacity 8 -overload-service 10ms
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
