package schedule

// ConfigWithRand returns cfg with its random source replaced; randN must
// return a value in [0, n) for n > 0.
func ConfigWithRand(cfg Config, randN func(n int64) int64) Config {
	cfg.randN = randN
	return cfg
}
