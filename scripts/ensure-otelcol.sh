#!/usr/bin/env bash
# Build the demo stack's OpenTelemetry Collector with the OpenTelemetry
# Collector builder (ocb): the builder pinned in tools/otelcol/go.mod
# generates a distribution from tools/otelcol/builder-config.yaml (receivers
# otlp; processors memory_limiter, batch; exporters otlp, debug and the
# contrib prometheus exporter), resolves its modules through the Go module
# proxy and compiles it into
# ${GOTRY_TOOLS_BIN:-$HOME/.cache/gotry-tools/bin}/otelcol-gotry. Prints that
# path as the last line on stdout; progress goes to stderr. The build is
# skipped while the manifest, go.mod and go.sum hash the same as the stamp
# beside the binary.
#
#   GOTRY_FORCE_BUILD=1  rebuild even if the cache looks current
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=lib/toolcache.sh
source "$ROOT/scripts/lib/toolcache.sh"
toolcache_init ensure-otelcol

MODDIR="$ROOT/tools/otelcol"
MANIFEST="$MODDIR/builder-config.yaml"
BIN="$BINDIR/otelcol-gotry"

WANT=$(toolcache_hash "$MANIFEST" "$MODDIR/go.mod" "$MODDIR/go.sum")
if toolcache_fresh "$BIN" "$WANT"; then
	log "cached: $BIN"
	echo "$BIN"
	exit 0
fi

log "building the collector into $BIN with ocb (cold: several minutes)"
start=$(date +%s)
TMP=$(mktemp -d "$BINDIR/.otelcol.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
(
	cd "$MODDIR"
	GOWORK=off GOFLAGS="${GOFLAGS:-} -mod=readonly" \
		go build -trimpath -o "$TMP/builder" go.opentelemetry.io/collector/cmd/builder
) >&2
# The manifest's output_path is relative: the builder writes the generated
# sources (main.go, components.go, go.mod) and the binary under $TMP. It runs
# `go mod tidy` there, then `go build -trimpath -ldflags="-s -w"` with
# CGO_ENABLED=0.
(cd "$TMP" && GOWORK=off "$TMP/builder" --config="$MANIFEST") >&2
mv -f "$TMP/otelcol-gotry/otelcol-gotry" "$BIN"
toolcache_stamp "$BIN" "$WANT"
log "built in $(($(date +%s) - start))s"
echo "$BIN"
