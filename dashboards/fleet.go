package dashboards

import (
	"fmt"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

// failing selects the attempts that failed: a retryable result or an error
// that is not retryable; a hedge that lost its race (cancelled) did not.
func failing() string {
	return fmt.Sprintf("%s=~%q", LabelAttemptOutcome, OutcomeRetryable+"|"+OutcomeFailure)
}

// extra selects the attempts a request adds to its first: retries and
// hedges.
func extra() string {
	return fmt.Sprintf("%s!=%q", LabelAttemptKind, KindInitial)
}

// fleetRow: what every replica of every job together sends each downstream
// (attempts ÷ requests, summed over instances and jobs), and whether it is
// failing, as GotryFleetRetryAmplification reads them. The filters apply as
// everywhere: with the job filter at All (its default) the panels see the
// whole fleet.
func fleetRow() row {
	attempts := func(extra ...string) string {
		return sumBy(rate(selector(MetricAttempts, extra...)), LabelServer)
	}
	requests := sumBy(rate(selector(requestCount)), LabelServer)
	return row{title: "Fleet", panels: []cog.Builder[dashboard.Panel]{
		graph("Fleet amplification by downstream",
			"Attempts per request each host gets from every instance of the selected jobs (all of them by default) together: the load the whole fleet's retries and hedges add. gotry's budget pays back retries that succeed and holds a failing host to about 1.0 plus each replica's reserve once; GotryFleetRetryAmplification fires above 1.2 while more than half of the retries and hedges fail.",
			unitTimes, 12,
			t(div(attempts(), requests), "{{"+LabelServer+"}}")),
		graph("Fleet failing attempts by downstream",
			"Share of each host's attempts, from every job, that failed (a retryable result or an error), and of its retries and hedges alone: retries that mostly succeed mask independent failures; retries that mostly fail, as in an outage, only add load (GotryFleetRetryAmplification). Hedges that lost their race are not failures.",
			unitRatio, 12,
			t(div(attempts(failing()), attempts()), "{{"+LabelServer+"}} all attempts"),
			t(div(attempts(extra(), failing()), attempts(extra())), "{{"+LabelServer+"}} retries and hedges")),
		graph("Amplification by calling job",
			"Attempts per request by job and host, for the hosts and jobs selected: which callers add the load.",
			unitTimes, 24,
			t(div(sumBy(rate(selector(MetricAttempts)), LabelJob, LabelServer), sumBy(rate(selector(requestCount)), LabelJob, LabelServer)),
				"{{"+LabelJob+"}} → {{"+LabelServer+"}}")),
	}}
}
