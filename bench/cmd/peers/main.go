// Command peers benchmarks gotry side by side with go-retryablehttp,
// failsafe-go, heimdall and otelhttp, and prints Markdown tables:
//
//	cd bench && go run ./cmd/peers            # everything, 5 rounds (a few minutes)
//	cd bench && go run ./cmd/peers -quick     # a few seconds, to check it works
//	cd bench && go run ./cmd/peers -only hedging,outage
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
