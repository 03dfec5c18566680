#!/usr/bin/env bash
# Build the Jaeger v2 binary pinned in tools/jaeger/go.mod into a cache dir and
# print its path as the last line on stdout. The build is skipped when the
# cached binary was built from the same tools/jaeger/go.mod + go.sum (and the
# same build flags); the hash is stored next to the binary.
#
#   GOTRY_TOOLS_BIN   cache dir (default: $HOME/.cache/gotry-tools/bin)
#   GOTRY_FORCE_BUILD=1  rebuild even if the cache looks current
#
# Progress goes to stderr. A cold build (module download + compile) takes
# ~12 minutes on 2 cores; a warm cache returns immediately.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=lib/toolcache.sh
source "$ROOT/scripts/lib/toolcache.sh"
toolcache_init ensure-jaeger
# The stamp's name predates lib/toolcache.sh; keeping it keeps caches valid.
TOOLCACHE_STAMP=.gosum.sha256
MODDIR="$ROOT/tools/jaeger"
BIN="$BINDIR/jaeger"

if [[ ! -f "$MODDIR/go.mod" || ! -f "$MODDIR/go.sum" ]]; then
	log "missing $MODDIR/go.mod or go.sum"
	exit 1
fi

# Version of the pinned module, stamped into `jaeger version` output.
JVER=$(awk '$1 == "github.com/jaegertracing/jaeger" {print $2; exit}' "$MODDIR/go.mod")
BUILD_FLAGS="-trimpath -ldflags=-X=github.com/jaegertracing/jaeger/internal/version.latestVersion=${JVER}"

WANT=$(toolcache_hash "$MODDIR/go.mod" "$MODDIR/go.sum" -- "$BUILD_FLAGS")
if toolcache_fresh "$BIN" "$WANT"; then
	log "cached: $BIN"
	echo "$BIN"
	exit 0
fi

mkdir -p "$BINDIR"
log "building jaeger into $BIN (cold: several minutes)"
start=$(date +%s)
TMP="$BIN.tmp.$$"
trap 'rm -f "$TMP"' EXIT
(
	cd "$MODDIR"
	# -mod=readonly: fail instead of silently editing the pinned go.mod/go.sum.
	GOWORK=off GOFLAGS="${GOFLAGS:-} -mod=readonly" CGO_ENABLED=0 \
		go build $BUILD_FLAGS -o "$TMP" github.com/jaegertracing/jaeger/cmd/jaeger
) >&2
mv -f "$TMP" "$BIN"
trap - EXIT
toolcache_stamp "$BIN" "$WANT"
log "built in $(($(date +%s) - start))s"
echo "$BIN"
