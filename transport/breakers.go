package transport

import "github.com/MrVSiK/gotry/resilience"

// UntrackedAdmissions returns how many requests were served untracked (no
// breaker, adaptive delay or concurrency limit) because every tracked host
// was pinned by an open breaker (an open breaker is never evicted before its
// OpenDuration ends; see WithMaxHosts). It only grows; export it as a
// counter.
func (t *Transport) UntrackedAdmissions() uint64 {
	return t.engine.UntrackedAdmissions()
}

// Stats returns a snapshot of the transport's state for gauges: its budget
// and every tracked host's breaker, adaptive hedge delay and concurrency
// limit (see resilience.Stats). It allocates; call it from a scrape, not
// per request.
func (t *Transport) Stats() resilience.Stats { return t.engine.Stats() }
