# The two commands a new user needs: `make demo` and `make test`.
GO ?= go
# The Go release everything here is built and tested with. The go command
# fetches it from the Go module proxy on first use (about 10 s). It carries the
# standard-library security fixes that govulncheck asks for; go.mod itself
# only needs Go 1.26.
export GOTOOLCHAIN ?= go1.27.3
# The oldest Go that go.mod allows (its go line, go 1.26.0): unit-min runs the
# unit suite on it too, since the standard library's behaviour differs between
# releases (Go 1.26's HTTP/2 client answers empty responses with a body of its
# own, not http.NoBody). Fetched from the module proxy on first use.
MIN_GO ?= go1.26.0
# The packages of the library's modules, from the root through go.work:
# ./... stops at a nested go.mod, so each module is named (./telemetry/...
# too stops at telemetry/promexport). bench, the sixth module of the
# workspace, has its own target (peers-smoke).
PKGS := ./... ./telemetry/... ./telemetry/promexport/... ./cmd/gotry-demo/... ./internal/sdktest/...
# Modules outside go.work (contrib/*, dashboards, realstack, examples/*,
# tools/*) build on their own go.mod and replace directives: a workspace
# has one build list, and theirs would move the versions of client-go, the
# AWS SDK, Prometheus' server and testify they build against. In them the
# go command runs with GOWORK=off.
SOLO := GOWORK=off
# The SDK adapters, released modules outside go.work (sdk-test, lint, vuln,
# tidy).
CONTRIB_MODULES := contrib/awssdk contrib/kubernetes

.PHONY: fuzz soak vuln tidy
.PHONY: test sdk-test migrate-test peers-smoke vet unit unit-min dashboards realstack stack-config tools bench bench-peers lint demo demo-stack fuzz

## test: everything CI runs: vet, the race-enabled suites with goleak (on
## the pinned toolchain and on go.mod's minimum Go), the
## dashboards and alert rules (promtool), and the real-stack tests on
## loopback (the demo → Jaeger and Prometheus 2.42; the compose stack's path
## demo → collector → Jaeger, Prometheus 2.42 and 3), and gotry under the
## AWS SDK and client-go (sdk-test), and the migration examples beside
## go-retryablehttp, heimdall and failsafe-go (migrate-test). Installs and
## builds the tools it needs (cached).
test: vet unit unit-min dashboards stack-config peers-smoke sdk-test migrate-test realstack

## tools: Prometheus 2.42 and promtool (Debian); Jaeger, the ocb-built
## collector and Prometheus 3 (built from the Go module proxy, cached)
tools:
	bash scripts/ensure-prometheus.sh >/dev/null
	bash scripts/ensure-jaeger.sh >/dev/null
	bash scripts/ensure-otelcol.sh >/dev/null
	bash scripts/ensure-prometheus3.sh >/dev/null

## vet: go vet (every module of the library) and a gofmt check (every Go file)
vet:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

## unit: the race-enabled test suites of the library's modules (root,
## telemetry, promexport, the demo, internal/sdktest; the root's includes
## the build-list check of internal/depcheck), then the allocation pins
## (which the race detector would blur)
unit:
	$(GO) test -race -count=1 $(PKGS)
	$(GO) test -count=1 -run '^TestAllocationsPerRequest$$' ./transport/

## unit-min: the same suites on go.mod's minimum Go ($(MIN_GO)); the
## allocation pins are the pinned toolchain's
unit-min:
	GOTOOLCHAIN=$(MIN_GO) $(GO) test -race -count=1 $(PKGS)

## dashboards: the generated dashboards match their generator; alert rules pass promtool
dashboards:
	bash scripts/ensure-prometheus.sh >/dev/null
	cd dashboards && $(SOLO) $(GO) vet ./... && $(SOLO) $(GO) test -race -count=1 ./...

## realstack: the demo against real Jaeger, collector and Prometheus 2 and 3
## on loopback (about 4 minutes: two runs of the demo, and a breaker alert
## that must fire and then clear)
realstack: tools
	cd realstack && $(SOLO) $(GO) vet ./... && $(SOLO) $(GO) test -count=1 -timeout 30m -v ./...

## bench: the core's benchmarks and telemetry's beside otelhttp alone, in
## BENCH_ROUNDS rounds of go test -count=1 (so every round measures each case
## within seconds of bare; -count=5 would run bare five times, then the next
## case five times), then internal/benchratio: ratios against bare of the same
## round (medians over rounds) and issue #13's targets, each met or MISSED.
## A few minutes. A missed target does not fail make bench; a failed
## benchmark, or no results at all, does.
BENCH_ROUNDS ?= 5
bench:
	for i in $$(seq $(BENCH_ROUNDS)); do \
	  $(GO) test -run '^$$' -bench . -benchmem -count=1 ./transport/ ./resilience/; \
	  $(GO) test -run '^$$' -bench '^BenchmarkRoundTrip$$' -benchmem -count=1 ./telemetry/; \
	done | $(GO) run ./internal/benchratio

## peers-smoke: the peer comparison in its quick mode, so it keeps building and working
peers-smoke:
	cd bench && $(GO) vet ./... && $(GO) test -count=1 ./...

## sdk-test: the SDK adapters, vet and race-enabled tests with goleak:
## contrib/awssdk (gotry under the AWS SDK for Go v2, S3 against gofakes3)
## and contrib/kubernetes (under client-go, a fake API server speaking
## Kubernetes JSON), with injected faults. Each is a module of its own, so
## neither SDK enters the root's go.mod. A cold build (empty build cache,
## -race) compiles client-go and the S3 client: 7.5 min on a busy 2-core
## machine (3.6 min of CPU); seconds once cached. The tests take about
## 30 s (awssdk 18 s, kubernetes 13 s).
sdk-test:
	@set -e; for m in $(CONTRIB_MODULES); do \
		echo "sdk-test: $$m"; \
		(cd $$m && $(SOLO) $(GO) vet ./... && $(SOLO) $(GO) test -race -count=1 ./...); \
	done

## migrate-test: MIGRATING.md's examples, one client built with
## go-retryablehttp, heimdall and failsafe-go and again with gotry
## (own module examples/migrate, so none of the three enters go.mod)
migrate-test:
	cd examples/migrate && $(SOLO) $(GO) vet ./... && $(SOLO) $(GO) test -race -count=1 ./...

## bench-peers: gotry beside go-retryablehttp, failsafe-go, heimdall and otelhttp
## (own module bench/, ~3 min); writes nothing, prints the tables of BENCHMARKS.md
bench-peers:
	cd bench && $(GO) run ./cmd/peers

# -modfile is refused in workspace mode, so the linters run with GOWORK=off:
# each module is checked against its own go.mod (the nested ones reach the
# working tree through their replace directives).
TOOL := $(SOLO) $(GO) tool -modfile=$(CURDIR)/tools/lint/go.mod
# The modules make lint and make vuln check, relative to the root.
LIB_MODULES := . telemetry telemetry/promexport cmd/gotry-demo internal/sdktest
LINT_MODULES := $(LIB_MODULES) $(CONTRIB_MODULES) dashboards examples/migrate
VULN_MODULES := $(LIB_MODULES) $(CONTRIB_MODULES) dashboards
FUZZTIME ?= 20s
# Fuzz targets as package:Target, the package relative to the module root.
FUZZ_TARGETS := transport:FuzzParseRetryAfter transport:FuzzRetryAfterWait transport:FuzzDefaultClassifier \
	transport:FuzzBodyReplay transport:FuzzHedgesAndRetriesNeverExceedMaxAttempts \
	transport:FuzzBreakerNeverAdmitsMoreThanHalfOpenProbes \
	resilience:FuzzBackoff resilience/schedule:FuzzSchedule

## lint: gofmt, vet and golangci-lint (pinned in tools/lint, config .golangci.yml) on
## the library's modules, the SDK adapters (contrib/*), dashboards and
## examples/migrate
lint: vet
	@set -e; for m in $(LINT_MODULES); do \
		echo "golangci-lint: $$m"; \
		(cd $$m && $(TOOL) golangci-lint run ./...); \
	done

## vuln: govulncheck (pinned in tools/lint) against an offline vulnerability
## database built from the golang.org/x/vulndb module (scripts/ensure-vulndb.sh, cached)
vuln:
	@set -e; db=$$(bash scripts/ensure-vulndb.sh); \
	for m in $(VULN_MODULES); do \
		echo "govulncheck: $$m"; \
		(cd $$m && $(TOOL) govulncheck -db "$$db" ./...); \
	done

## tidy: go mod tidy in every module of the project (not tools/*, whose
## pins scripts/ensure-*.sh describe); each on its own go.mod and replace
## directives, since go mod tidy does not read go.work
TIDY_MODULES := $(LIB_MODULES) $(CONTRIB_MODULES) bench dashboards realstack examples/migrate examples/otel-collector/validate
tidy:
	@set -e; for m in $(TIDY_MODULES); do (cd $$m && $(SOLO) $(GO) mod tidy); done

## fuzz: every fuzz target for $(FUZZTIME) each (their seed corpora already run in make test)
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		$(GO) test -run '^$$' -fuzz "^$${t#*:}$$" -fuzztime $(FUZZTIME) "./$${t%%:*}/"; \
	done

## soak: a 60s race-enabled soak, then 1,000,000 hosts through the breaker (make test runs a 10s soak)
soak:
	GOTRY_SOAK=60s $(GO) test -race -count=1 -timeout 15m -run '^TestSoak$$' -v ./transport/
	GOTRY_MEMORY_HOSTS=1000000 $(GO) test -count=1 -timeout 15m -run '^TestBreakersStayBoundedOverManyHosts$$' -v ./transport/

## demo: the live demo, needing only Go: a flaky upstream on loopback, traffic
## through gotry with full telemetry, a terminal view and span waterfalls.
## Flags via ARGS, e.g. make demo ARGS="-duration 0" (until Ctrl-C).
demo:
	$(GO) run ./cmd/gotry-demo $(ARGS)

## demo-stack: the demo with native Jaeger and Prometheus on loopback (examples/otel-collector)
demo-stack:
	bash examples/otel-collector/native/run.sh $(ARGS)

## stack-config: offline checks of docker-compose.yml and the collector, Prometheus and Grafana configs
stack-config: tools
	cd examples/otel-collector/validate && $(SOLO) $(GO) vet ./... && $(SOLO) $(GO) test -count=1 ./...
