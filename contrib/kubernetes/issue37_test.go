package kubernetes_test

import (
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/MrVSiK/gotry/transport"
)

// TestIssue37KubernetesEveryGetSucceeds holds issue #37 (the retry budget
// must not lose requests to independent, partial failures) with client-go:
// 60 Gets, one after the other, at QPS 20 (burst 1), over gotry with its
// defaults (and only a hook that counts its retries). The first attempt of
// every fourth Get meets a 429 or a 503, in turn, both without
// Retry-After, as a proxy in front of the API server answers: client-go
// does not resend those, so gotry is the only layer that retries them, and
// a single retry heals each. Every Get must succeed.
//
// Run it with go test -run Issue37 in contrib/kubernetes; the log line
// gives the counts.
func TestIssue37KubernetesEveryGetSucceeds(t *testing.T) {
	const gets, qps = 60, 20
	srv := newFakeAPIServer(t)
	var seen kubeCounter
	cms := newConfigMaps(t, srv, qps, 1, func(rt http.RoundTripper) http.RoundTripper {
		return transport.New(rt, seen.hooks())
	})
	if _, err := cms.Create(opCtx(t), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	srv.counts()
	seen.retries.Store(0)

	// The Gets run one at a time, so the plan knows which Get an arrival
	// belongs to from current, and whether it is that Get's first arrival
	// from the last one it saw (plans run under the server's lock).
	var current, faults atomic.Int32
	last := int32(-1)
	srv.setPlan(func(op string, _ int, _ http.Header) fault {
		if op != "get" {
			return pass
		}
		k := current.Load()
		first := k != last
		last = k
		if !first || k%4 != 0 {
			return pass
		}
		faults.Add(1)
		if (k/4)%2 == 0 {
			return bare429
		}
		return bare503
	})
	start := time.Now()
	var failed []int32
	var firstErr error
	for k := range int32(gets) {
		current.Store(k)
		if _, err := cms.Get(opCtx(t), "a", metav1.GetOptions{}); err != nil {
			failed = append(failed, k)
			if firstErr == nil {
				firstErr = err
			}
		}
	}
	took := time.Since(start)
	arrivals, _, _ := srv.counts()
	t.Logf("%d Gets at QPS %d (burst 1) in %v: %d first attempts failed, %d arrivals, %d gotry retries; %d Gets failed %v",
		gets, qps, took.Round(time.Millisecond), faults.Load(), arrivals["get"], seen.retries.Load(), len(failed), failed)
	if faults.Load() != gets/4 {
		t.Errorf("%d faults served, want %d: the test's schedule is broken", faults.Load(), gets/4)
	}
	if len(failed) > 0 {
		t.Errorf("%d of %d Gets failed, want none; the first, Get %d: %v", len(failed), gets, failed[0], firstErr)
	}
}
