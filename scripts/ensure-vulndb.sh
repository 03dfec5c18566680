#!/usr/bin/env bash
# Build an offline Go vulnerability database for govulncheck from the
# golang.org/x/vulndb module, fetched through the Go module proxy (so no
# access to vuln.go.dev is needed). The database is written in the v1 layout
# (index/db.json, index/modules.json, ID/<id>.json) by the standard-library
# generator in tools/vulndb, into
#   ${GOTRY_TOOLS_BIN:-$HOME/.cache/gotry-tools}/vulndb/<version>-<hash>
# where <hash> covers the generator source, and is reused while both match.
# The last line on stdout is the file:// URL for `govulncheck -db`.
# Progress goes to stderr.
#
# Set GOTRY_VULNDB_VERSION to use another x/vulndb pseudo-version, and
# GOTRY_FORCE_BUILD=1 to rebuild.
set -euo pipefail

VULNDB_VERSION=${GOTRY_VULNDB_VERSION:-v0.0.0-20261105234957-e22db6528018}

log() { echo "ensure-vulndb: $*" >&2; }

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
GEN="$ROOT/tools/vulndb"
GO=${GO:-go}

HASH=$(cat "$GEN/go.mod" "$GEN/main.go" | sha256sum | cut -c1-12)
BASE="${GOTRY_TOOLS_BIN:-$HOME/.cache/gotry-tools}/vulndb"
OUT="$BASE/$VULNDB_VERSION-$HASH"

if [[ "${GOTRY_FORCE_BUILD:-0}" != 1 && -f "$OUT/index/db.json" ]]; then
	log "cached: $OUT"
else
	log "downloading golang.org/x/vulndb@$VULNDB_VERSION via $("$GO" env GOPROXY)"
	# Run outside any module so no go.mod is consulted or edited.
	JSON=$(cd / && GOFLAGS=-mod=mod GOWORK=off "$GO" mod download -json "golang.org/x/vulndb@$VULNDB_VERSION") || true
	field() { sed -n "s/^[[:space:]]*\"$1\": \"\(.*\)\",\{0,1\}$/\1/p" <<<"$JSON" | head -n1; }
	ERR=$(field Error)
	if [[ -n "$ERR" ]]; then
		log "go mod download failed: $ERR"
		exit 1
	fi
	DIR=$(field Dir)
	INFO=$(field Info)
	if [[ -z "$DIR" || ! -d "$DIR/data/osv" ]]; then
		log "no data/osv in module dir '$DIR'"
		exit 1
	fi
	# The x/vulndb commit time stands in for the (zero) per-entry modified times.
	MODIFIED=$(sed -n 's/.*"Time":"\([^"]*\)".*/\1/p' "$INFO")

	mkdir -p "$BASE"
	TMP=$(mktemp -d "$BASE/.build.XXXXXX")
	trap 'rm -rf "$TMP"' EXIT
	(cd "$GEN" && GOWORK=off "$GO" run . -src "$DIR/data/osv" -out "$TMP/db" -modified "$MODIFIED")
	rm -rf "$OUT"
	mv "$TMP/db" "$OUT"
	rm -rf "$TMP"
	trap - EXIT
	# Drop databases built from other versions or generator revisions.
	find "$BASE" -mindepth 1 -maxdepth 1 -type d ! -name "$(basename "$OUT")" ! -name '.build.*' -exec rm -rf {} +
	log "built $OUT"
fi

echo "file://$OUT"
