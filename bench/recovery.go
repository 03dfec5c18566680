package bench

import (
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
)

// recoveryBreaker is the breaker of the recovery scenario: default threshold,
// a short open period so recovery is visible within the run.
var recoveryBreaker = resilience.BreakerConfig{OpenDuration: time.Second}

// RecoveryRow is one candidate through an outage and its end.
type RecoveryRow struct {
	Name            string
	Offered         float64 // client requests per second
	DownRate        float64 // server requests per second while down, whole phase
	DownSteady      float64 // the same over the last second of the outage
	DownSuccess     float64 // share of requests started while down that succeeded
	UpRate          float64 // server requests per second once up
	Recovered       bool    // every request started some time after recovery succeeded
	ToNormal        time.Duration
	FailuresAfterUp int
	RequestsAfterUp int
}

// RecoveryResult is the recovery table.
type RecoveryResult struct {
	Rate     float64
	Down, Up time.Duration
	Rows     []RecoveryRow
}

// runRecovery offers a steady load to a backend that is down (503) for
// cfg.downTime and then up for cfg.upTime.
func runRecovery(cfg *Config) (*RecoveryResult, error) {
	be := newBackend()
	defer be.Close()
	url := be.URL() + "/item"
	res := &RecoveryResult{Rate: cfg.recoveryRate, Down: cfg.downTime, Up: cfg.upTime}
	cands := []struct {
		name string
		wrap func(http.RoundTripper) http.RoundTripper
	}{
		{"gotry + breaker (open 1s)", func(b http.RoundTripper) http.RoundTripper {
			return gotryRetry(b, outageRetry, transport.WithBreaker(recoveryBreaker))
		}},
		{"gotry defaults, no breaker", func(b http.RoundTripper) http.RoundTripper { return gotryRetry(b, outageRetry) }},
		{"go-retryablehttp", func(b http.RoundTripper) http.RoundTripper { return retryableHTTP(b, outageRetry) }},
		{"failsafe-go retry", func(b http.RoundTripper) http.RoundTripper { return failsafeRetry(b, outageRetry, 0) }},
		{"heimdall retries", func(b http.RoundTripper) http.RoundTripper { return heimdallRetry(b, outageRetry) }},
	}
	total := cfg.downTime + cfg.upTime
	for _, c := range cands {
		cfg.progress("recovery: %s", c.name)
		base := newLoopbackBase()
		client := &http.Client{Transport: c.wrap(base)}
		be.reset()
		t0 := time.Now()
		be.downUntil.Store(t0.Add(cfg.downTime).UnixNano())
		be.countBuckets(t0, total)
		recs := openLoop(client, url, cfg.recoveryRate, total, t0, nil)
		time.Sleep(20 * time.Millisecond)
		base.CloseIdleConnections()
		buckets := be.bucketCounts()
		sum := func(from, to time.Duration) float64 {
			var n int64
			for i := int(from / bucketWidth); i < int(to/bucketWidth) && i < len(buckets); i++ {
				n += buckets[i]
			}
			return float64(n) / (to - from).Seconds()
		}
		steady := min(time.Second, cfg.downTime/2)
		row := RecoveryRow{Name: c.name, Offered: float64(len(recs)) / total.Seconds(),
			DownRate: sum(0, cfg.downTime), DownSteady: sum(cfg.downTime-steady, cfg.downTime),
			UpRate: sum(cfg.downTime, total)}
		var downN, downOK int
		lastFail := time.Duration(-1)
		for _, r := range recs {
			if r.start < cfg.downTime {
				downN++
				if r.ok {
					downOK++
				}
				continue
			}
			row.RequestsAfterUp++
			if !r.ok {
				row.FailuresAfterUp++
				lastFail = max(lastFail, r.start-cfg.downTime)
			}
		}
		row.DownSuccess = float64(downOK) / float64(max(downN, 1))
		row.ToNormal = max(lastFail, 0)
		row.Recovered = lastFail < cfg.upTime-cfg.upTime/10
		res.Rows = append(res.Rows, row)
	}
	return res, nil
}

func (res *RecoveryResult) write(w io.Writer) {
	fmt.Fprintf(w, "\n### Recovery after an outage\n\n")
	fmt.Fprintf(w, "The backend answers 503 for %v, then 200 for %v; %.0f requests/s offered throughout (open loop). "+
		"Every candidate: 4 attempts, 1ms constant backoff. \"Back to normal\" is when the last failing request started, after the backend recovered.\n\n",
		res.Down, res.Up, res.Rate)
	fmt.Fprintf(w, "| candidate | offered req/s | backend req/s while down | … last %v of it | backend req/s once up | failed after recovery | back to normal after |\n",
		min(time.Second, res.Down/2))
	fmt.Fprintf(w, "|---|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range res.Rows {
		normal := "immediately"
		if r.FailuresAfterUp > 0 {
			normal = fmtDur(r.ToNormal)
		}
		if !r.Recovered {
			normal = "not within the run"
		}
		fmt.Fprintf(w, "| %s | %.0f | %.0f | %.0f | %.0f | %d of %d | %s |\n", r.Name, r.Offered, r.DownRate, r.DownSteady,
			r.UpRate, r.FailuresAfterUp, r.RequestsAfterUp, normal)
	}
}
