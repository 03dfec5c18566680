package transport

// UntrackedAdmissions returns how many requests were served untracked (no
// breaker, adaptive delay or concurrency limit) because every tracked host
// was pinned by an open breaker (an open breaker is never evicted before its
// OpenDuration ends; see WithMaxHosts). It only grows; export it as a
// counter.
func (t *Transport) UntrackedAdmissions() uint64 {
	return t.engine.UntrackedAdmissions()
}
