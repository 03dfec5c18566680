package bench

import (
	"net/http"
	"testing"
)

// BenchmarkInMemory is the in-memory success path of every overhead
// candidate, through an *http.Client as in the tables, as a Go benchmark for
// profiling one of them:
//
//	go test -run '^$' -bench 'InMemory/gotry_defaults$' -cpuprofile cpu.out -memprofile mem.out
func BenchmarkInMemory(b *testing.B) {
	kit := newOtelKit()
	defer kit.shutdown()
	req, _ := http.NewRequest(http.MethodGet, "http://bench.local/item", nil)
	for _, c := range overheadCandidates(memBase{}, kit) {
		f := clientOp(&http.Client{Transport: c.rt}, req)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := f(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkLoopback is the loopback success path of every overhead candidate
// as a Go benchmark, for profiling one of them against bare.
func BenchmarkLoopback(b *testing.B) {
	kit := newOtelKit()
	defer kit.shutdown()
	be := newBackend()
	defer be.Close()
	base := newLoopbackBase()
	defer base.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodGet, be.URL()+"/item", nil)
	for _, c := range overheadCandidates(base, kit) {
		f := clientOp(&http.Client{Transport: c.rt}, req)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := f(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
