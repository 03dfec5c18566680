package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"
)

// Scenarios, in the order Run runs them.
var Scenarios = []string{"overhead", "hedging", "randstall", "randshift", "lognormal", "bimodal", "burst", "loadstall", "shift", "outage", "recovery", "scaling", "overload", "fleet", "chain", "crowd", "ladder"}

// Config selects what Run does. The zero value runs everything at full size
// with 5 rounds.
type Config struct {
	// Quick shrinks every scenario so the whole run takes a few seconds:
	// for checking that it works, not for numbers.
	Quick bool
	// Rounds is how many interleaved repetitions the hedging and scaling
	// scenarios make (default 5; 1 when Quick). Overhead makes twice as
	// many, each candidate paired with an adjacent sample of bare.
	Rounds int
	// Only, if not empty, names the scenarios to run.
	Only []string
	// HedgeDelay is the hedge delay of both hedgers (default 10ms).
	HedgeDelay time.Duration
	// Progress, if set, receives a line per step.
	Progress io.Writer
	// Overload shapes the overload scenario; its zero value is the
	// issue's (see OverloadConfig).
	Overload OverloadConfig
	// Crowd shapes the crowd scenario (many clients, each with the
	// concurrency limit, sharing one server through a capacity drop); its
	// zero value is issue 28's 20-client shape (see CrowdConfig).
	Crowd CrowdConfig
	// RandomRequests is how many requests each round of a random-latency
	// scenario sends (default 2,000; 200 when Quick).
	RandomRequests int
	// LadderCell is how long each cell of the ladder scenario (independent
	// 503s, and the outage) runs (default 8s; 500ms when Quick).
	LadderCell time.Duration

	overheadRounds               int
	warmup, sampleTime           time.Duration
	hedgeRequests, hedgeWorkers  int
	hedgeRounds                  int
	randomRequests               int
	outageRate, recoveryRate     float64
	outageTime, downTime, upTime time.Duration
	shiftAt, shiftTotal          time.Duration
	scalingLevels                []int
	scalingTime                  time.Duration
	fleetTime, chainTime         time.Duration
	slowBefore, slowDrop         time.Duration
	slowAfter                    time.Duration
	began                        time.Time
}

func (c *Config) setDefaults() {
	if c.Rounds <= 0 {
		c.Rounds = 5
		if c.Quick {
			c.Rounds = 1
		}
	}
	if c.HedgeDelay <= 0 {
		c.HedgeDelay = 10 * time.Millisecond
	}
	c.hedgeRounds = c.Rounds
	c.overheadRounds = 2 * c.Rounds
	c.hedgeWorkers = 8
	c.outageRate, c.recoveryRate = 1000, 200
	if c.LadderCell <= 0 {
		// 8s: issue #37's cells; 800 requests each, so a success figure
		// is within about ±1 point (two standard errors at p = 30%).
		c.LadderCell = 8 * time.Second
		if c.Quick {
			c.LadderCell = 500 * time.Millisecond
		}
	}
	if c.Quick {
		c.warmup, c.sampleTime = 2*time.Millisecond, 5*time.Millisecond
		c.hedgeRequests = 200
		c.randomRequests = 200
		c.outageTime, c.downTime, c.upTime = 150*time.Millisecond, 200*time.Millisecond, 200*time.Millisecond
		c.scalingLevels, c.scalingTime = []int{1, 16, 256}, 10*time.Millisecond
		c.shiftAt, c.shiftTotal = 500*time.Millisecond, time.Second
		c.fleetTime, c.chainTime = 500*time.Millisecond, 500*time.Millisecond
		c.slowBefore, c.slowDrop, c.slowAfter = time.Second, time.Second, 2*time.Second
		return
	}
	c.warmup, c.sampleTime = 100*time.Millisecond, 100*time.Millisecond
	c.hedgeRequests = 2000
	c.randomRequests = 2000
	if c.RandomRequests > 0 {
		c.randomRequests = c.RandomRequests
	}
	c.outageTime, c.downTime, c.upTime = 2*time.Second, 3*time.Second, 3*time.Second
	c.scalingLevels, c.scalingTime = []int{1, 2, 4, 8, 16, 32, 64, 128, 256}, 150*time.Millisecond
	c.shiftAt, c.shiftTotal = 4*time.Second, 10*time.Second
	// 20s: a fleet's outage costs each client its reserve once, so the
	// quietest fleet (1 request/s a client) needs 20 requests a client to
	// show what a lasting outage costs, not its first second.
	c.fleetTime, c.chainTime = 20*time.Second, 15*time.Second
	c.slowBefore, c.slowDrop, c.slowAfter = 3*time.Second, 4*time.Second, 10*time.Second
}

func (c *Config) wants(s string) bool {
	if len(c.Only) == 0 {
		return true
	}
	for _, o := range c.Only {
		if o == s {
			return true
		}
	}
	return false
}

func (c *Config) progress(format string, args ...any) {
	if c.Progress != nil {
		fmt.Fprintf(c.Progress, "%6.1fs  %s\n", time.Since(c.began).Seconds(), fmt.Sprintf(format, args...))
	}
}

// Results is everything one Run measured; a nil field was not run.
type Results struct {
	Overhead *OverheadResult
	Hedging  *HedgeResult
	Shift    *ShiftResult
	// Random holds the random-latency scenarios that ran, in order.
	Random   []*RandomResult
	Outage   *OutageResult
	Recovery *RecoveryResult
	Scaling  *ScalingResult
	Overload *OverloadResult
	Fleet    *FleetResult
	Crowd    *CrowdResult
	Ladder   *LadderResult
}

// Run runs the selected scenarios and writes Markdown to w.
func Run(w io.Writer, cfg Config) (*Results, error) {
	cfg.setDefaults()
	cfg.began = time.Now()
	for _, o := range cfg.Only {
		if !contains(Scenarios, o) {
			return nil, fmt.Errorf("bench: unknown scenario %q (have %s)", o, strings.Join(Scenarios, ", "))
		}
	}
	start := time.Now()
	res := &Results{}
	var err error
	fmt.Fprintf(w, "Machine: %d CPUs (%s), GOMAXPROCS %d, %s %s/%s. Started %s, load average %s. Rounds: %d%s.\n",
		runtime.NumCPU(), cpuModel(), runtime.GOMAXPROCS(0), runtime.Version(), runtime.GOOS, runtime.GOARCH,
		start.UTC().Format("2006-01-02 15:04 UTC"), loadAvg(), cfg.Rounds, map[bool]string{true: " (quick mode: not for numbers)"}[cfg.Quick])
	if cfg.wants("overhead") {
		if res.Overhead, err = runOverhead(&cfg); err != nil {
			return res, err
		}
		res.Overhead.write(w, cfg.overheadRounds)
	}
	if cfg.wants("hedging") {
		if res.Hedging, err = runHedging(&cfg); err != nil {
			return res, err
		}
		res.Hedging.write(w, cfg.hedgeRounds)
	}
	for _, sc := range randomScenarios {
		if cfg.wants(sc) {
			r, err := runRandom(&cfg, sc)
			if err != nil {
				return res, err
			}
			r.write(w)
			res.Random = append(res.Random, r)
		}
	}
	if cfg.wants("shift") {
		if res.Shift, err = runShift(&cfg); err != nil {
			return res, err
		}
		res.Shift.write(w)
	}
	if cfg.wants("outage") {
		if res.Outage, err = runOutage(&cfg); err != nil {
			return res, err
		}
		res.Outage.write(w)
	}
	if cfg.wants("recovery") {
		if res.Recovery, err = runRecovery(&cfg); err != nil {
			return res, err
		}
		res.Recovery.write(w)
	}
	if cfg.wants("scaling") {
		if res.Scaling, err = runScaling(&cfg); err != nil {
			return res, err
		}
		res.Scaling.write(w)
	}
	if cfg.wants("overload") {
		if res.Overload, err = runOverload(&cfg); err != nil {
			return res, err
		}
		res.Overload.write(w)
	}
	if cfg.wants("fleet") {
		if res.Fleet, err = runFleet(&cfg); err != nil {
			return res, err
		}
		res.Fleet.write(w)
	}
	if cfg.wants("chain") && !cfg.wants("fleet") { // the fleet scenario runs the chain too
		res.Fleet = &FleetResult{Chain: runChain(&cfg)}
		res.Fleet.write(w)
	}
	if cfg.wants("crowd") {
		if res.Crowd, err = runCrowd(&cfg); err != nil {
			return res, err
		}
		res.Crowd.write(w)
	}
	if cfg.wants("ladder") {
		if res.Ladder, err = runLadder(&cfg); err != nil {
			return res, err
		}
		res.Ladder.write(w)
	}
	res.writeGoals(w)
	fmt.Fprintf(w, "\nTotal run time %s; load average at the end %s.\n", time.Since(start).Round(time.Second), loadAvg())
	return res, nil
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

// cpuModel reads the CPU model name, as lscpu prints it.
func cpuModel() string {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

// loadAvg returns the 1, 5 and 15 minute load averages, which say how busy
// the machine was: a number far above the CPU count means the run competed
// with other work.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
