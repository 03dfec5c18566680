#!/usr/bin/env bash
# The demo stack natively, with no containers: Jaeger v2 (as the collector and
# trace store) and the Debian Prometheus on 127.0.0.1, then the demo with
# OTLP export on. Arguments go to gotry-demo (e.g. -duration 0). Jaeger and
# Prometheus are stopped, by their own PIDs, when the demo ends.
#
#   examples/otel-collector/native/run.sh -duration 2m
#
# Ports: OTLP 4317/4318, Jaeger query API 16686, Jaeger's Prometheus
# exporter 8889, Prometheus 9090, the demo's /metrics 9464.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
log() { echo "run.sh: $*" >&2; }
# shellcheck source=../../../scripts/lib/prometheus-url.sh
source "$ROOT/scripts/lib/prometheus-url.sh"

JAEGER=$(bash "$ROOT/scripts/ensure-jaeger.sh" | tail -n1)
PROMETHEUS=$(bash "$ROOT/scripts/ensure-prometheus.sh" | head -n1)

TMP=$(mktemp -d)
PIDS=()
cleanup() {
	for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
	for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
	rm -rf "$TMP"
}
trap cleanup EXIT

"$JAEGER" --config="$HERE/jaeger.yaml" >"$TMP/jaeger.log" 2>&1 &
PIDS+=($!)
"$PROMETHEUS" --config.file="$HERE/prometheus.yml" --storage.tsdb.path="$TMP/prometheus" \
	--web.listen-address=127.0.0.1:9090 >"$TMP/prometheus.log" 2>&1 &
PIDS+=($!)

wait_for() { # name url
	for _ in $(seq 100); do
		if curl -fsS -o /dev/null "$2" 2>/dev/null; then return 0; fi
		sleep 0.1
	done
	log "$1 did not come up; its log:"
	cat "$TMP/$1.log" >&2
	exit 1
}
wait_for jaeger http://127.0.0.1:16686/api/services
wait_for prometheus http://127.0.0.1:9090/-/ready
log "Jaeger query API http://127.0.0.1:16686/api/traces?service=gotry-demo  (no UI in the Go-built binary)"
# Debian's Prometheus 2.42 serves its UI under /classic/ (/alerts is a 404
# there); the function picks the page this Prometheus really has.
log "Prometheus alerts $(prometheus_alerts_url http://127.0.0.1:9090)"
log "Prometheus API    http://127.0.0.1:9090/api/v1/query?query=up"

cd "$ROOT"
OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 \
OTEL_SERVICE_NAME="${OTEL_SERVICE_NAME:-gotry-demo}" \
OTEL_METRIC_EXPORT_INTERVAL="${OTEL_METRIC_EXPORT_INTERVAL:-5000}" \
	go run ./cmd/gotry-demo -metrics-addr 127.0.0.1:9464 "$@"
