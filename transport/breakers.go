package transport

// UntrackedAdmissions returns how many requests were admitted without a
// breaker because every breaker in their host's shard was open (an open
// breaker is never evicted before its OpenDuration ends; see
// resilience.BreakerConfig.MaxBreakers). It only grows; export it as a
// counter. It is 0 when the breaker is off.
func (t *Transport) UntrackedAdmissions() uint64 {
	return t.engine.UntrackedAdmissions()
}
