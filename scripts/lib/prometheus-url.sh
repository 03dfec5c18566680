# prometheus_alerts_url BASE prints the link to the alerts that the
# Prometheus at BASE (e.g. http://127.0.0.1:9090) really serves:
#   BASE/alerts           Prometheus with its web UI (the release images)
#   BASE/classic/alerts   Debian's 2.x package, which leaves the React UI
#                         out: /alerts is a 404 there, the classic UI works
#   BASE/api/v1/rules?type=alert
#                         no UI at all (Prometheus 3 built from its Go
#                         module, without the npm-built assets): the API
# Sourced by examples/otel-collector/native/run.sh; realstack tests it
# against both Prometheus versions.
prometheus_alerts_url() {
	local base=$1 path
	for path in /alerts /classic/alerts; do
		if curl -fsS -o /dev/null "$base$path" 2>/dev/null; then
			echo "$base$path"
			return 0
		fi
	done
	echo "$base/api/v1/rules?type=alert"
}
