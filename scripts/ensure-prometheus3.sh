#!/usr/bin/env bash
# Build Prometheus 3 (prometheus and promtool) from the
# github.com/prometheus/prometheus module pinned in tools/prometheus/go.mod
# (v0.305.0 is Prometheus v3.5.0, the release docker-compose.yml runs) into
# ${GOTRY_TOOLS_BIN:-$HOME/.cache/gotry-tools/bin} as prometheus3 and
# promtool3. Prints the two paths, one per line (promtool last); progress
# goes to stderr. The build is skipped while go.mod, go.sum and the build
# flags hash the same as the stamp beside the binaries.
#
# The module carries no web UI assets (they are built with npm upstream and
# embedded only with the builtinassets build tag), so it is built without
# that tag: the HTTP API (/api/v1/..., /-/ready) works, the UI pages do not.
#
#   GOTRY_FORCE_BUILD=1  rebuild even if the cache looks current
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=lib/toolcache.sh
source "$ROOT/scripts/lib/toolcache.sh"
toolcache_init ensure-prometheus3

MODDIR="$ROOT/tools/prometheus"
PROM="$BINDIR/prometheus3"
PROMTOOL="$BINDIR/promtool3"

# The module version v0.3MM.P is Prometheus v3.MM.P; stamp it into --version
# and /api/v1/status/buildinfo.
MODVER=$(awk '$1 == "github.com/prometheus/prometheus" {print $2; exit}' "$MODDIR/go.mod")
VERSION=$(sed -E 's/^v0\.3([0-9][0-9])\.([0-9]+)$/3.\1.\2/; s/^3\.0([0-9])/3.\1/' <<<"$MODVER")
V=github.com/prometheus/common/version
LDFLAGS="-X=$V.Version=$VERSION -X=$V.Branch=module -X=$V.Revision=$MODVER"

WANT=$(toolcache_hash "$MODDIR/go.mod" "$MODDIR/go.sum" -- "-trimpath" "$LDFLAGS")
if toolcache_fresh "$PROM" "$WANT" && toolcache_fresh "$PROMTOOL" "$WANT"; then
	log "cached: $PROM ($VERSION)"
else
	log "building Prometheus $VERSION ($MODVER) into $BINDIR (cold: several minutes)"
	start=$(date +%s)
	TMP=$(mktemp -d "$BINDIR/.prometheus3.XXXXXX")
	trap 'rm -rf "$TMP"' EXIT
	(
		cd "$MODDIR"
		GOWORK=off GOFLAGS="${GOFLAGS:-} -mod=readonly" CGO_ENABLED=0 \
			go build -trimpath "-ldflags=$LDFLAGS" \
			-o "$TMP/" github.com/prometheus/prometheus/cmd/prometheus github.com/prometheus/prometheus/cmd/promtool
	) >&2
	mv -f "$TMP/prometheus" "$PROM"
	mv -f "$TMP/promtool" "$PROMTOOL"
	toolcache_stamp "$PROM" "$WANT"
	toolcache_stamp "$PROMTOOL" "$WANT"
	log "built in $(($(date +%s) - start))s"
fi
log "$("$PROM" --version 2>&1 | head -n1)"
echo "$PROM"
echo "$PROMTOOL"
