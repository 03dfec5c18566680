package transport_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/MrVSiK/gotry/transport"
)

// TestNothingOfARequestCarriesOverToTheNext: the transport reuses the state
// of a finished request for the next one, and nothing of the first may
// show in the second: a request whose Policy let a POST be retried, with a
// classifier of its own and a body, is followed by a plain POST, which must
// get one attempt, judged by the default classifier, with its own body. The
// pair runs many times, so the second request mostly gets the first's state.
func TestNothingOfARequestCarriesOverToTheNext(t *testing.T) {
	var attempts atomic.Int32
	var lastBody atomic.Value
	base := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		attempts.Add(1)
		var b strings.Builder
		if r.Body != nil {
			buf := make([]byte, 64)
			n, _ := r.Body.Read(buf)
			b.Write(buf[:n])
			r.Body.Close()
		}
		lastBody.Store(b.String())
		return fakeResponse(r, http.StatusServiceUnavailable, "busy"), nil
	})
	tr := transport.New(base, noDelay, transport.WithMaxAttempts(3), transport.WithRetryBudget(0, 0))
	retryAll := transport.Policy{RetryNonIdempotent: true,
		Classifier: func(transport.Attempt) transport.Decision { return transport.Retry }}
	send := func(ctx context.Context, body string) int32 {
		attempts.Store(0)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://reuse.test/", strings.NewReader(body))
		req.GetBody = nil // a body that cannot be replayed without buffering
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return attempts.Load()
	}
	for i := range 50 {
		if got := send(transport.WithPolicy(context.Background(), retryAll), "first"); got != 3 {
			t.Fatalf("round %d: the retried POST made %d attempts, want 3", i, got)
		}
		if got := send(context.Background(), "second"); got != 1 {
			t.Fatalf("round %d: the plain POST after it made %d attempts, want 1", i, got)
		}
		if got := lastBody.Load(); got != "second" {
			t.Fatalf("round %d: the plain POST sent body %q, want %q", i, got, "second")
		}
	}
}
