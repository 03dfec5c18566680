package kubernetes_test

import (
	"errors"
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/MrVSiK/gotry/contrib/kubernetes"
	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
)

// Over HTTP/2 an API server that fails one request resets its stream
// (RST_STREAM) where over HTTP/1.1 it would close the connection. client-go
// resends a GET whose connection was reset, not one whose stream was; gotry
// at one attempt does not resend either. Under kubernetes.Wrap the GET is
// resent, by client-go; a create whose stream was reset after the server
// read it (it took effect) is not, by either layer.
func TestKubernetesResetStream(t *testing.T) {
	cases := []struct {
		name string
		op   string // the call whose first arrival's stream is reset
		wrap func(*kubeCounter) func(http.RoundTripper) http.RoundTripper
		// what the caller sees and what reached the server
		wantErr                bool
		wantArrivals, wantEffs int
	}{
		{"get under kubernetes.Wrap", "get", func(c *kubeCounter) func(http.RoundTripper) http.RoundTripper {
			return kubernetes.Wrap(c.hooks())
		}, false, 2, 1},
		{"create under kubernetes.Wrap", "create", func(c *kubeCounter) func(http.RoundTripper) http.RoundTripper {
			return kubernetes.Wrap(c.hooks())
		}, true, 1, 1},
		// The gap kubernetes.Wrap closes: gotry at one attempt, as
		// recommended before, under client-go.
		{"get under gotry at one attempt", "get", func(c *kubeCounter) func(http.RoundTripper) http.RoundTripper {
			return func(rt http.RoundTripper) http.RoundTripper {
				return transport.New(rt, c.hooks(), transport.WithMaxAttempts(1))
			}
		}, true, 1, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := newFakeAPIServerH2(t)
			var seen kubeCounter
			cms := newConfigMaps(t, srv, 1000, 1000, tc.wrap(&seen))
			if tc.op == "get" {
				if _, err := cms.Create(opCtx(t), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
				srv.counts()
			}
			srv.setPlan(func(op string, n int, _ http.Header) fault {
				if op == tc.op && n == 1 {
					return streamReset
				}
				return pass
			})
			start := time.Now()
			var err error
			switch tc.op {
			case "get":
				_, err = cms.Get(opCtx(t), "a", metav1.GetOptions{})
			case "create":
				_, err = cms.Create(opCtx(t), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, metav1.CreateOptions{})
			}
			took := time.Since(start)
			arrivals, effects, _ := srv.counts()
			t.Logf("%s: err=%v after %v; arrivals %s, effects %s, gotry attempts %s, gotry retries %d, protocols %v",
				tc.name, err, took.Round(time.Millisecond), sortedOps(arrivals), sortedOps(effects), sortedOps(seen.attempts), seen.retries.Load(), srv.protocols())
			if (err != nil) != tc.wantErr {
				t.Errorf("err = %v, want an error: %v", err, tc.wantErr)
			}
			if arrivals[tc.op] != tc.wantArrivals || effects[tc.op] != tc.wantEffs {
				t.Errorf("%s: %d arrivals, %d took effect; want %d and %d", tc.op, arrivals[tc.op], effects[tc.op], tc.wantArrivals, tc.wantEffs)
			}
			if n := seen.retries.Load(); n != 0 {
				t.Errorf("gotry retried %d times; under client-go it sends each request once", n)
			}
			if p := srv.protocols(); p["HTTP/2.0"] == 0 || len(p) != 1 {
				t.Errorf("protocols %v, want HTTP/2 only", p)
			}
		})
	}
}

// A server that resets every GET's stream is failing, not one flaky
// request: gotry's breaker counts each reset, opens after
// DefaultFailureThreshold of them, and client-go does not resend gotry's
// refusal, so a Get stops after 5 sends instead of client-go's 11.
func TestKubernetesResetStreamStormOpensTheBreaker(t *testing.T) {
	srv := newFakeAPIServerH2(t)
	cms := newConfigMaps(t, srv, 1000, 1000, kubernetes.Wrap())
	srv.setPlan(func(op string, _ int, _ http.Header) fault {
		if op == "get" {
			return streamReset
		}
		return pass
	})
	start := time.Now()
	_, err := cms.Get(opCtx(t), "a", metav1.GetOptions{})
	took := time.Since(start)
	arrivals, _, _ := srv.counts()
	t.Logf("every stream reset: err=%v after %v; %d arrivals", err, took.Round(time.Millisecond), arrivals["get"])
	if !errors.Is(err, resilience.ErrCircuitOpen) {
		t.Errorf("err = %v, want gotry's open breaker", err)
	}
	if arrivals["get"] != resilience.DefaultFailureThreshold {
		t.Errorf("%d arrivals, want %d: the resets up to the breaker's threshold", arrivals["get"], resilience.DefaultFailureThreshold)
	}
}
