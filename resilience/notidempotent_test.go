package resilience

import (
	"context"
	"errors"
	"testing"
)

// notIdempotentOp answers its attempts with codes: 0 fails with a
// retryable error safe to repeat (a refused stream), any other code is a
// retryable result the call may not be repeated for (Verdict.NotIdempotent).
type notIdempotentOp struct {
	scripted
	codes []int
}

var errRefused = errors.New("refused, unprocessed")

func (o *notIdempotentOp) Do(ctx context.Context, a AttemptInfo) (int, error) {
	_, _ = o.scripted.Do(ctx, a) // counts the attempt; the codes decide the result
	if c := o.codes[min(a.Number, len(o.codes))-1]; c != 0 {
		return c, nil
	}
	return 0, errRefused
}

func (o *notIdempotentOp) Classify(v int, err error, a AttemptInfo) Verdict {
	return Verdict{Retryable: true, NotIdempotent: err == nil, Code: v}
}

// TestVerdictNotIdempotentEndsTheCall: an operation that allows further
// attempts only for failures safe to repeat gets them for those; a
// retryable result marked NotIdempotent ends the call with that result and
// the reason not_idempotent, as a one-attempt Prepare would, on the plain
// path (no hooks) and the general one alike.
func TestVerdictNotIdempotentEndsTheCall(t *testing.T) {
	for _, hooked := range []bool{false, true} {
		op := &notIdempotentOp{scripted: scripted{steps: []step{{}}}, codes: []int{0, 503, 200}}
		rec := &recorder{}
		cfg := engineSpec{}
		if hooked {
			cfg.Hooks = rec.hooks()
		}
		res := Execute(context.Background(), newEngine(cfg), Call[int]{Op: op, Policy: Policy{MaxAttempts: 5}})
		if res.Err != nil || res.Value != 503 || op.Calls() != 2 {
			t.Fatalf("hooks %v: got %d, %v after %d attempts; want the 503 after 2", hooked, res.Value, res.Err, op.Calls())
		}
		if hooked && rec.end.Reason != ReasonNotIdempotent {
			t.Errorf("end reason %v, want not_idempotent", rec.end.Reason)
		}
	}
}
