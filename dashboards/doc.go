// Package dashboards generates gotry's Grafana dashboards from Go code and
// holds the metric contract they, and the Prometheus alert rules beside them,
// are checked against.
//
// The dashboards are built with the Grafana Foundation SDK in Generate and
// written to grafana/*.json by cmd/gen; the JSON files are checked in so they
// can be imported without Go. Tests fail when the checked-in files differ
// from what Generate returns, and when a panel queries a metric or label that
// is not in the contract (metrics.go). Queries lists every PromQL expression
// of every panel, and Substitute turns one into a query a plain Prometheus
// accepts, so a test against a real Prometheus can run them all.
//
// This is its own module so the SDK never enters gotry's go.mod.
package dashboards

//go:generate go run ./cmd/gen -dir grafana
