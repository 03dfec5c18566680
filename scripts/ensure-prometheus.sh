#!/usr/bin/env bash
# Make sure `prometheus` and `promtool` are installed (Debian package), without
# leaving a system Prometheus service running. Prints the two paths, one per
# line, on stdout (promtool last). Progress goes to stderr.
#
# Needs root (or passwordless sudo) only when the package is missing.
set -euo pipefail

log() { echo "ensure-prometheus: $*" >&2; }

find_bins() {
	PROM=$(command -v prometheus 2>/dev/null || true)
	PROMTOOL=$(command -v promtool 2>/dev/null || true)
}

find_bins
if [[ -z "$PROM" || -z "$PROMTOOL" ]]; then
	SUDO=""
	if [[ $(id -u) -ne 0 ]]; then
		if command -v sudo >/dev/null 2>&1; then
			SUDO="sudo"
		else
			log "prometheus/promtool missing and not root; install the 'prometheus' package"
			exit 1
		fi
	fi

	# Keep the package's maintainer scripts from starting a service:
	# invoke-rc.d / deb-systemd-invoke honour policy-rc.d exit code 101.
	POLICY=/usr/sbin/policy-rc.d
	CREATED_POLICY=0
	if [[ ! -e "$POLICY" ]]; then
		printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$POLICY" >/dev/null
		$SUDO chmod 755 "$POLICY"
		CREATED_POLICY=1
	fi
	cleanup() { if [[ $CREATED_POLICY -eq 1 ]]; then $SUDO rm -f "$POLICY"; fi; }
	trap cleanup EXIT

	log "installing Debian package 'prometheus'"
	export DEBIAN_FRONTEND=noninteractive
	$SUDO apt-get update -qq >&2
	$SUDO apt-get install -y -qq --no-install-recommends prometheus >&2

	# Belt and braces: if a service manager started it anyway, stop it.
	if command -v systemctl >/dev/null 2>&1 && [[ -d /run/systemd/system ]]; then
		$SUDO systemctl disable --now prometheus >/dev/null 2>&1 || true
	fi
	if command -v service >/dev/null 2>&1; then
		$SUDO service prometheus stop >/dev/null 2>&1 || true
	fi
	if command -v update-rc.d >/dev/null 2>&1; then
		$SUDO update-rc.d prometheus disable >/dev/null 2>&1 || true
	fi

	cleanup
	trap - EXIT
	find_bins
fi

if [[ -z "$PROM" || -z "$PROMTOOL" ]]; then
	log "prometheus/promtool still not found on PATH"
	exit 1
fi

log "$("$PROM" --version 2>&1 | head -n1)"
echo "$PROM"
echo "$PROMTOOL"
