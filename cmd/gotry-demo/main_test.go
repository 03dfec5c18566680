package main

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap/zapcore"

	"github.com/MrVSiK/gotry/cmd/gotry-demo/internal/demo"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func noEnv(string) string { return "" }

func TestParseDefaults(t *testing.T) {
	o, err := parse(nil, io.Discard, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	want := demo.DefaultConfig()
	c := o.cfg
	if c.Duration != want.Duration || c.Rate != want.Rate || c.MetricsAddr != "127.0.0.1:9464" ||
		c.WaterfallEvery != 10*time.Second || c.BreakerOpenFor != want.BreakerOpenFor || c.Faults != want.Faults ||
		c.Outage != want.Outage || c.Drop != want.Drop || strings.Join(c.LimitHosts, ",") != "search" ||
		c.OTLPTraces || c.OTLPMetrics || o.plain || o.upstreamOnly {
		t.Fatalf("defaults differ from demo.DefaultConfig: %+v", o)
	}
	if strings.Join(c.Hosts, ",") != "inventory,payments,search,checkout" {
		t.Fatalf("hosts %q", c.Hosts)
	}
}

// The capacity drop and the concurrency limit have flags of their own.
func TestParseDropAndLimitFlags(t *testing.T) {
	o, err := parse([]string{"-drop-host", "inventory", "-drop-start", "2s", "-drop-every", "0", "-drop-for", "3s",
		"-drop-capacity", "4", "-drop-service", "50ms", "-drop-queue", "8", "-limit-hosts", "inventory, search"}, io.Discard, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	want := demo.Drop{Host: "inventory", Start: 2 * time.Second, For: 3 * time.Second, Capacity: 4, Service: 50 * time.Millisecond, Queue: 8}
	if o.cfg.Drop != want || strings.Join(o.cfg.LimitHosts, ",") != "inventory,search" {
		t.Fatalf("drop %+v, limit hosts %q; want %+v and inventory,search", o.cfg.Drop, o.cfg.LimitHosts, want)
	}
	o, err = parse([]string{"-limit-hosts", ""}, io.Discard, noEnv)
	if err != nil || len(o.cfg.LimitHosts) != 0 {
		t.Fatalf(`-limit-hosts "": %v, %q; want the limit off`, err, o.cfg.LimitHosts)
	}
}

func TestParseFlags(t *testing.T) {
	env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "COLUMNS": "150"}
	o, err := parse([]string{"-duration", "0", "-rate", "10", "-p503", "0.2", "-outage-host", "", "-hedge-delay", "0",
		"-metrics-addr", "127.0.0.1:0", "-plain", "-log-level", "debug", "-target", "http://a/, http://b/x",
		"-seed", "42"}, io.Discard, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	c := o.cfg
	if c.Duration != 0 || c.Rate != 10 || c.Faults.Unavailable != 0.2 || c.Outage.Host != "" || c.HedgeDelay != 0 ||
		!o.plain || c.LogLevel != zapcore.DebugLevel || c.Seed != 42 || c.Width != 150 ||
		strings.Join(c.Targets, " ") != "http://a/ http://b/x" || !c.OTLPTraces || !c.OTLPMetrics {
		t.Fatalf("flags not applied: %+v", o)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{"unknown flag", []string{"-nope"}},
		{"extra argument", []string{"extra"}},
		{"bad level", []string{"-log-level", "loud"}},
		{"bad duration", []string{"-duration", "soon"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := parse(tt.args, io.Discard, noEnv); err == nil {
				t.Fatalf("parse(%q) = nil error", tt.args)
			}
		})
	}
	var usage bytes.Buffer
	if _, err := parse([]string{"-h"}, &usage, noEnv); !errors.Is(err, flag.ErrHelp) || !strings.Contains(usage.String(), "OTEL_EXPORTER_OTLP_ENDPOINT") {
		t.Fatalf("-h: %v\n%s", err, usage.String())
	}
}

// A short run through the command's own path: flags, signals, the demo and
// its summary, with no goroutine left behind.
func TestRunShort(t *testing.T) {
	var out, errOut bytes.Buffer
	err := run([]string{"-duration", "1s", "-rate", "40", "-metrics-addr", "127.0.0.1:0", "-waterfall-every", "0",
		"-outage-host", "", "-p503", "0.2", "-log-file", "-"}, &out, &errOut)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, errOut.String())
	}
	for _, want := range []string{"gotry demo · for 1s", "── summary after", "breakers  inventory"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if !strings.Contains(errOut.String(), `"msg":"gotry: retry scheduled"`) {
		t.Errorf("-log-file - wrote no JSON retry lines to stderr:\n%.2000s", errOut.String())
	}
}

func TestRunUpstreamOnly(t *testing.T) {
	var out bytes.Buffer
	if err := run([]string{"-upstream-only", "-duration", "300ms"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"inventory  http://127.0.0.1:", "payments   http://127.0.0.1:", "search     http://127.0.0.1:"} {
		if !strings.Contains(out.String(), h) {
			t.Errorf("output lacks %q:\n%s", h, out.String())
		}
	}
}
