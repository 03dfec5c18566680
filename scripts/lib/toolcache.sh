# Shared by the scripts/ensure-*.sh that build a tool from pinned Go modules
# into ${GOTRY_TOOLS_BIN:-$HOME/.cache/gotry-tools/bin}. A build is reused
# while the hash of its inputs (stamped in BIN$TOOLCACHE_STAMP beside the
# binary; TOOLCACHE_STAMP defaults to .inputs.sha256) is unchanged;
# GOTRY_FORCE_BUILD=1 rebuilds anyway.
#
# Source it, then:
#   toolcache_init NAME            sets BINDIR, log()
#   toolcache_hash FILE... -- STR  prints the sha256 of the files and strings
#   toolcache_fresh BIN HASH       true when BIN exists and was built from HASH
#   toolcache_stamp BIN HASH       records that BIN was built from HASH

toolcache_init() {
	TOOLCACHE_NAME=$1
	BINDIR="${GOTRY_TOOLS_BIN:-$HOME/.cache/gotry-tools/bin}"
	mkdir -p "$BINDIR"
}

log() { echo "$TOOLCACHE_NAME: $*" >&2; }

toolcache_hash() {
	{
		while [[ $# -gt 0 && $1 != -- ]]; do
			cat "$1"
			shift
		done
		[[ $# -gt 0 ]] && shift
		printf '%s\n' "$@"
	} | sha256sum | cut -d' ' -f1
}

toolcache_fresh() {
	local stamp="$1${TOOLCACHE_STAMP:-.inputs.sha256}"
	[[ "${GOTRY_FORCE_BUILD:-0}" != 1 && -x "$1" && -f "$stamp" && "$(cat "$stamp")" == "$2" ]]
}

toolcache_stamp() {
	echo "$2" >"$1${TOOLCACHE_STAMP:-.inputs.sha256}"
}
