package bench

import (
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
)

// overheadMode is one column group of the overhead tables.
type overheadMode struct {
	name    string
	workers int
}

// OverheadRow is one candidate's success-path cost in one base and mode.
type OverheadRow struct {
	Name             string
	NsPerOp          float64 // median over rounds
	Ratio            float64 // median over rounds of ns/op ÷ an adjacent sample of bare
	RatioLo, RatioHi float64 // the ratios' interquartile range
	Allocs, Bytes    float64 // median per op
}

// OverheadResult holds the success-path tables: Rows[base][mode][candidate].
type OverheadResult struct {
	Bases, Modes []string
	Rows         [][][]OverheadRow
}

// runOverhead measures the success path over an in-memory base and over a
// loopback server, sequentially and with GOMAXPROCS goroutines, every
// request sent through an *http.Client.
func runOverhead(cfg *Config) (*OverheadResult, error) {
	kit := newOtelKit()
	defer kit.shutdown()
	be := newBackend()
	defer be.Close()
	loop := newLoopbackBase()
	defer loop.CloseIdleConnections()

	memReq, _ := http.NewRequest(http.MethodGet, "http://bench.local/item", nil)
	loopReq, _ := http.NewRequest(http.MethodGet, be.URL()+"/item", nil)
	type base struct {
		name string
		ops  []op
	}
	var names []string
	var bases []base
	// Every candidate, on either base, is driven as application code drives
	// it and as issue #13 measures it: (&http.Client{Transport: rt}).Do(req).
	// Bare pays for the same client, so "× bare" is the wrapper's share of a
	// request made through http.Client.
	{
		cs := overheadCandidates(memBase{}, kit)
		b := base{name: "in-memory base (wrapper alone, through http.Client)"}
		for _, c := range cs {
			names = append(names, c.name)
			b.ops = append(b.ops, clientOp(&http.Client{Transport: c.rt}, memReq))
		}
		bases = append(bases, b)
	}
	{
		cs := overheadCandidates(loop, kit)
		b := base{name: "loopback server (http.Transport)"}
		for _, c := range cs {
			b.ops = append(b.ops, clientOp(&http.Client{Transport: c.rt}, loopReq))
		}
		bases = append(bases, b)
	}
	modes := []overheadMode{{"sequential", 1}, {fmt.Sprintf("parallel (%d goroutines)", runtime.GOMAXPROCS(0)), runtime.GOMAXPROCS(0)}}

	// Calibrate (and warm up) every cell, then sample round-robin.
	n := make([][][]int, len(bases))
	samples := make([][][][]sample, len(bases))
	for bi, b := range bases {
		n[bi] = make([][]int, len(modes))
		samples[bi] = make([][][]sample, len(modes))
		for mi, m := range modes {
			n[bi][mi] = make([]int, len(b.ops))
			samples[bi][mi] = make([][]sample, len(b.ops))
			for ci, f := range b.ops {
				k, err := calibrate(f, m.workers, cfg.warmup, cfg.sampleTime)
				if err != nil {
					return nil, fmt.Errorf("overhead %s %s %s: %w", b.name, m.name, names[ci], err)
				}
				n[bi][mi][ci] = k
			}
		}
	}
	// Each round measures every candidate right next to a fresh sample of
	// bare (alternating which goes first), so the ratio of the pair is
	// immune to drift slower than two samples; the tables report medians.
	ratios := make([][][][]float64, len(bases))
	for bi := range bases {
		ratios[bi] = make([][][]float64, len(modes))
		for mi := range modes {
			ratios[bi][mi] = make([][]float64, len(bases[bi].ops))
		}
	}
	rounds := cfg.overheadRounds
	for r := range rounds {
		cfg.progress("overhead: round %d/%d", r+1, rounds)
		for bi, b := range bases {
			for mi, m := range modes {
				others := len(b.ops) - 1
				for j := range others {
					ci := 1 + (j+r)%others // rotate who goes first
					pair := [2]int{0, ci}
					if (r+j)%2 == 1 {
						pair = [2]int{ci, 0}
					}
					var got [2]sample
					for k, idx := range pair {
						s, err := measure(b.ops[idx], n[bi][mi][idx], m.workers)
						if err != nil {
							return nil, fmt.Errorf("overhead %s %s %s: %w", b.name, m.name, names[idx], err)
						}
						samples[bi][mi][idx] = append(samples[bi][mi][idx], s)
						got[k] = s
					}
					if pair[0] != 0 {
						got[0], got[1] = got[1], got[0]
					}
					ratios[bi][mi][ci] = append(ratios[bi][mi][ci], got[1].ns/got[0].ns)
				}
			}
		}
	}

	res := &OverheadResult{}
	for _, m := range modes {
		res.Modes = append(res.Modes, m.name)
	}
	for bi, b := range bases {
		res.Bases = append(res.Bases, b.name)
		var perMode [][]OverheadRow
		for mi := range modes {
			var rows []OverheadRow
			for ci := range b.ops {
				var ns, al, by []float64
				for _, s := range samples[bi][mi][ci] {
					ns = append(ns, s.ns)
					al = append(al, s.allocs)
					by = append(by, s.bytes)
				}
				row := OverheadRow{Name: names[ci], NsPerOp: median(ns), Ratio: 1, RatioLo: 1, RatioHi: 1,
					Allocs: median(al), Bytes: median(by)}
				if ci > 0 {
					rs := ratios[bi][mi][ci]
					row.Ratio = median(rs)
					row.RatioLo, row.RatioHi = quartiles(rs)
				}
				rows = append(rows, row)
			}
			perMode = append(perMode, rows)
		}
		res.Rows = append(res.Rows, perMode)
	}
	return res, nil
}

// clientOp sends req through an *http.Client, as application code does.
func clientOp(c *http.Client, req *http.Request) op {
	return func() error {
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		finish(resp)
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	}
}

func (res *OverheadResult) write(w io.Writer, rounds int) {
	for bi, b := range res.Bases {
		fmt.Fprintf(w, "\n### Success-path overhead, %s\n\n", b)
		if rounds > 1 {
			fmt.Fprintf(w, "× bare is the median over %d rounds of the ratio to a bare sample taken right before or after; interquartile range in brackets. ns/op, allocs/op and B/op are medians.\n\n", rounds)
		}
		fmt.Fprintf(w, "| candidate |")
		for _, m := range res.Modes {
			fmt.Fprintf(w, " %s ns/op | × bare | allocs/op | B/op |", short(m))
		}
		fmt.Fprintf(w, "\n|---|")
		for range res.Modes {
			fmt.Fprintf(w, "---:|---:|---:|---:|")
		}
		fmt.Fprintln(w)
		for ci := range res.Rows[bi][0] {
			fmt.Fprintf(w, "| %s |", res.Rows[bi][0][ci].Name)
			for mi := range res.Modes {
				row := res.Rows[bi][mi][ci]
				fmt.Fprintf(w, " %.0f | %s | %.1f | %.0f |", row.NsPerOp, fmtRatio(row.Ratio, row.RatioLo, row.RatioHi, rounds, ci == 0), row.Allocs, row.Bytes)
			}
			fmt.Fprintln(w)
		}
	}
}

// short names a mode for a column header.
func short(m string) string {
	if i := strings.Index(m, " ("); i > 0 {
		return m[:i]
	}
	return m
}
