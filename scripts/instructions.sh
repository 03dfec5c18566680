#!/usr/bin/env bash
# Instructions per operation of Go benchmarks, counted by valgrind's
# cachegrind: a measure that, unlike ns/op on a shared VM, repeats to within
# about 2% from run to run, for telling a few per cent of change apart.
#
#   scripts/instructions.sh <package dir> <benchmark regexp>...
#   scripts/instructions.sh ./transport 'BenchmarkInMemoryDirect/bare$' 'BenchmarkInMemoryDirect/armed$'
#   INSTR_N1=10000 INSTR_N2=30000 scripts/instructions.sh ./telemetry \
#       '^BenchmarkRoundTrip$/batcher/otelhttp$' '^BenchmarkRoundTrip$/batcher/gotry\+telemetry$'
#
# Each regexp must select one benchmark (go test matches each level of a
# name unanchored: 'BenchmarkInMemory/bare' also selects
# BenchmarkInMemoryParallel/bare; write '^BenchmarkInMemory$/bare$'). It is
# run twice under cachegrind,
# with -test.benchtime=N1x and N2x (INSTR_N1, INSTR_N2; 50000 and 150000 by
# default) on one processor, and the difference of the two totals divided by
# N2-N1 is printed: the instructions of one operation, without the program's
# start-up. The collector's work is counted too, on the same thread (under
# valgrind the program runs one thread at a time), so allocation-heavy code
# weighs more than on real cores: compare instruction counts with each
# other, not with times.
#
# Installs valgrind (Debian package) when it is missing.
set -euo pipefail

log() { echo "instructions: $*" >&2; }

if [[ $# -lt 2 ]]; then
	echo "usage: $0 <package dir> <benchmark regexp>..." >&2
	exit 2
fi
if ! command -v valgrind >/dev/null 2>&1; then
	SUDO=""
	[[ $(id -u) -ne 0 ]] && SUDO="sudo"
	log "installing valgrind"
	$SUDO apt-get install -y -qq valgrind >/dev/null ||
		{ $SUDO apt-get update -qq && $SUDO apt-get install -y -qq valgrind >/dev/null; }
fi

pkg=$1
shift
n1=${INSTR_N1:-50000}
n2=${INSTR_N2:-150000}
bin=$(mktemp -d)/bench.test
trap 'rm -rf "$(dirname "$bin")"' EXIT
go test -c -o "$bin" "$pkg"

# total <regexp> <n>: the instructions of one run of the test binary.
# Valgrind does not know the instruction the runtime reads the CPU's tick
# counter with on a contended lock (runtime.cputicks): a run that reaches
# it dies of SIGILL, so a run that printed no result is tried again, up to
# five times in all.
total() {
	local out try
	for try in 1 2 3 4 5; do
		out=$(GODEBUG=asyncpreemptoff=1 valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null \
			"$bin" -test.run '^$' -test.bench "$1" -test.benchtime="$2"x -test.cpu=1 2>&1) || true
		if grep -q '^Benchmark' <<<"$out"; then
			if [[ $(grep -c '^Benchmark' <<<"$out") -ne 1 ]]; then
				log "$1 selects more than one benchmark (anchor each level: '^BenchmarkX\$/case\$'):"
				grep '^Benchmark' <<<"$out" | sed 's/[[:space:]].*//' >&2
				exit 1
			fi
			grep 'I *refs' <<<"$out" | sed 's/.*refs: *//; s/,//g'
			return
		fi
		if ! grep -q 'SIGILL' <<<"$out"; then
			break
		fi
	done
	log "no result for $1 (no benchmark matched, or the run failed):"
	grep -v '^==' <<<"$out" | tail -5 >&2
	exit 1
}

for re in "$@"; do
	a=$(total "$re" "$n1")
	b=$(total "$re" "$n2")
	printf '%10d instructions/op  %s\n' $(((b - a) / (n2 - n1))) "$re"
done
