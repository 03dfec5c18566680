package resilience

import "time"

// One rule holds for every configuration struct of this package and of
// package transport (Settings, BreakerConfig, AdaptiveHedging,
// ConcurrencyLimit, both Policy types): a zero field takes its documented
// default, as a zero field of net/http's Transport does, so the zero value
// of each struct is its defaults; a setting that is on by default is
// turned off by saying so, with Off. A Policy's default is what its engine
// (or transport) was built with. Each struct's Validate names the field it
// rejects, in one shape: "resilience: Struct.Field must ..., got value".
// Settings (Retrier.Settings, transport.Transport.Settings, Engine.Settings)
// report the values in effect: every default filled in.
const (
	// Off turns off a setting whose zero value means its default:
	// Settings.BudgetRatio and BudgetReserve (no budget), MaxRetryAfter
	// (honour no server-dictated delay but zero), and, in a Policy, a
	// setting inherited from the engine (MaxHedges: no hedge). Any other
	// negative value is rejected.
	Off = -1

	// DefaultMaxAttempts is how many attempts a call may make, retries and
	// hedges together.
	DefaultMaxAttempts = 3
	// DefaultMaxRetryAfter is the longest server-dictated delay waited for:
	// a server asking for longer is better answered at once than waited
	// on while the caller's deadline runs down.
	DefaultMaxRetryAfter = 30 * time.Second
	// DefaultBudgetRatio is the retry budget's ratio: the retries that
	// fail add at most a quarter of the calls that succeed to the load a
	// downstream sees, and retries that succeed cost nothing (see
	// Settings.BudgetRatio). A quarter keeps every retry of a busy client
	// whose attempts fail independently up to 30% of the time: its failed
	// retries are then 0.12 a successful call.
	DefaultBudgetRatio = 0.25
	// DefaultBudgetReserve is the retry budget's reserve: the retries of
	// one request at the default of 3 attempts, so that a quiet client
	// absorbs an isolated failure whole.
	DefaultBudgetReserve = 2
	// DefaultMaxKeys is how many keys (hosts, for the transport) an engine
	// tracks.
	DefaultMaxKeys = 10000

	// The defaults of BreakerConfig's fields.
	DefaultFailureThreshold = 5
	DefaultOpenDuration     = 30 * time.Second
	DefaultHalfOpenProbes   = 1

	// The defaults of ConcurrencyLimit's fields.
	DefaultInitialLimit = 20
	DefaultMinLimit     = 1
	DefaultMaxLimit     = 1000

	// DefaultMaxExtraLoad is AdaptiveHedging.MaxExtraLoad's default: at
	// most one hedge per 20 calls.
	DefaultMaxExtraLoad = 0.05
)
