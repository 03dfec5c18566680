// Package bench compares gotry with the libraries users would pick instead:
// hashicorp/go-retryablehttp, failsafe-go's failsafehttp, gojek/heimdall and
// otelhttp (and, for hedging, cristalhq/hedgedhttp). It is its own module so that none of those ever enters gotry's
// go.mod; command peers (go run ./cmd/peers) runs every scenario and prints
// Markdown tables for BENCHMARKS.md.
//
// Every scenario measures its baseline in the same run and interleaves the
// candidates round by round, so drift on a shared machine hits all of them
// alike. Traffic goes to loopback only.
package bench
