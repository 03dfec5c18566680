package kubernetes_test

import (
	"context"
	"encoding/pem"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"

	"github.com/MrVSiK/gotry/contrib/kubernetes"
	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
)

// kubeCounter counts gotry's physical attempts per API call and its
// retries, as telemetry would see them.
type kubeCounter struct {
	mu       sync.Mutex
	attempts map[string]int
	retries  atomic.Int32
}

func (c *kubeCounter) hooks() transport.Option {
	return transport.WithHooks(transport.Hooks{
		OnAttemptEnd: func(e resilience.AttemptEndEvent) {
			op := kubeOp(transport.RequestOf(e.Event))
			c.mu.Lock()
			defer c.mu.Unlock()
			if c.attempts == nil {
				c.attempts = map[string]int{}
			}
			c.attempts[op]++
		},
		OnRetry: func(resilience.RetryEvent) { c.retries.Add(1) },
	})
}

// newConfigMaps is a typed client for config maps on srv, through wrap;
// the QPS limit is high unless the test is about it.
func newConfigMaps(t testing.TB, srv *fakeAPIServer, qps float32, burst int, wrap func(http.RoundTripper) http.RoundTripper) corev1client.ConfigMapInterface {
	t.Helper()
	cfg := &rest.Config{
		Host: srv.URL, QPS: qps, Burst: burst, WrapTransport: wrap,
		// The fake API server speaks JSON only; client-go would send
		// built-in types as protobuf.
		ContentConfig: rest.ContentConfig{ContentType: "application/json", AcceptContentTypes: "application/json"},
	}
	if srv.TLS != nil {
		cfg.CAData = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	}
	c, err := corev1client.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c.ConfigMaps(namespace)
}

func opCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestKubernetesRecommendedSetUpUnderFaults(t *testing.T) {
	srv := newFakeAPIServer(t)
	var seen kubeCounter
	cms := newConfigMaps(t, srv, 1000, 1000, kubernetes.Wrap(seen.hooks()))

	// The first of each call meets a fault client-go answers by itself:
	// priority and fairness throttling a create and a watch, a 503 with
	// Retry-After on a get, a reset connection under a list.
	srv.setPlan(func(op string, n int, _ http.Header) fault {
		switch {
		case op == "create" && n == 1, op == "watch" && n == 1:
			return throttled
		case op == "get" && n == 1:
			return unavailable
		case op == "list" && n == 1:
			return reset
		case op == "create" && n == 4:
			return bare503
		}
		return pass
	})

	for _, name := range []string{"a", "b"} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"k": name}}
		if _, err := cms.Create(opCtx(t), cm, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
	}
	// A 503 without Retry-After on a create: neither client-go nor gotry
	// sends it again, and the caller sees the server's answer.
	_, err := cms.Create(opCtx(t), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}}, metav1.CreateOptions{})
	if !apierrors.IsServiceUnavailable(err) {
		t.Errorf("create c after a bare 503: err = %v, want the 503", err)
	}
	got, err := cms.Get(opCtx(t), "a", metav1.GetOptions{})
	if err != nil || got.Data["k"] != "a" {
		t.Fatalf("get a = %v, %v; want the created config map", got, err)
	}
	list, err := cms.List(opCtx(t), metav1.ListOptions{})
	if err != nil || len(list.Items) != 2 {
		t.Fatalf("list: %v items, err %v; want 2", len(list.Items), err)
	}
	w, err := cms.Watch(opCtx(t), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	var names []string
	for len(names) < 2 {
		select {
		case e, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("watch closed after %v", names)
			}
			names = append(names, e.Object.(*corev1.ConfigMap).Name)
		case <-time.After(20 * time.Second):
			t.Fatalf("watch: only %v after 20s", names)
		}
	}
	w.Stop()
	sort.Strings(names)
	if names[0] != "a" || names[1] != "b" {
		t.Errorf("watch saw %v, want [a b]", names)
	}

	arrivals, effects, _ := srv.counts()
	seen.mu.Lock()
	attempts := seen.attempts
	seen.mu.Unlock()
	t.Logf("arrivals per call kind: %s", sortedOps(arrivals))
	t.Logf("gotry's attempts: %s; gotry's retries: %d", sortedOps(attempts), seen.retries.Load())
	t.Logf("effects: %s", sortedOps(effects))
	if effects["create"] != 2 {
		t.Errorf("%d creates took effect, want 2 (a and b)", effects["create"])
	}
	if n := seen.retries.Load(); n != 0 {
		t.Errorf("gotry retried %d times; under client-go it sends each request once", n)
	}
	// Every resend is client-go's, one per call that met a fault it
	// retries, and so a gotry attempt of its own; except the list's: the
	// reset came on a reused connection before any response, and net/http
	// itself sent the GET again on a new one, inside gotry's one attempt.
	want := map[string][2]int{"create": {4, 4}, "get": {2, 2}, "list": {2, 1}, "watch": {2, 2}}
	for op, n := range want {
		if arrivals[op] != n[0] || attempts[op] != n[1] {
			t.Errorf("%s: %d arrivals, %d gotry attempts; want %d and %d", op, arrivals[op], attempts[op], n[0], n[1])
		}
	}
}

// How many requests reach the API server per Get while every answer is a
// failure: both layers retrying (client-go over gotry's defaults) against
// the recommended set-up (client-go over gotry at one attempt with a
// breaker). Four workers run five Gets each. client-go resends each Get
// on a 503 with Retry-After (0 here) up to 10 times; gotry's breaker
// opens after 5 failures and client-go does not resend its refusal. A
// throttle is different (issue #37): a 429 (priority and fairness) never
// opens the breaker, so client-go's resends all go out, each waiting the
// server's Retry-After through client-go's QPS limiter; gotry's
// concurrency limit, cut by the 429s, may shed some, which client-go does
// not resend. (So did the set-up before: kubernetes.Classifier made a 429
// an answer, a success to the breaker.)
func TestKubernetesOutageArrivalsPerGet(t *testing.T) {
	const workers, perWorker = 4, 5
	// The breaker opens after 5 failures and stays open past the test;
	// each worker may have one more send in flight as it opens.
	breakerBound := float64(resilience.DefaultFailureThreshold+workers) / (workers * perWorker)
	cases := []struct {
		name     string
		wrap     func(http.RoundTripper) http.RoundTripper
		what     fault
		maxPerOp float64
	}{
		{
			name: "503 with Retry-After, both layers: client-go over gotry defaults",
			wrap: func(rt http.RoundTripper) http.RoundTripper {
				return transport.New(rt, transport.WithBackoff(resilience.Constant(time.Millisecond)))
			},
			what: unavailable,
			// client-go's 11 sends, each up to gotry's 3 attempts.
			maxPerOp: 33,
		},
		{
			// "Retry-After: 0" asks for no wait: a failure, not a throttle.
			name:     "503 with Retry-After, recommended: the breaker opens",
			wrap:     kubernetes.Wrap(),
			what:     unavailable,
			maxPerOp: breakerBound,
		},
		{
			// client-go does not resend these.
			name:     "503 without Retry-After, recommended: the breaker opens",
			wrap:     kubernetes.Wrap(),
			what:     bare503,
			maxPerOp: breakerBound,
		},
		{
			name: "429, recommended: a throttle, client-go resends",
			wrap: kubernetes.Wrap(),
			what: throttled,
			// client-go's 11 sends, one request each.
			maxPerOp: 11,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := newFakeAPIServer(t)
			cms := newConfigMaps(t, srv, 1000, 1000, tc.wrap)
			srv.setPlan(func(string, int, http.Header) fault { return tc.what })
			var wg sync.WaitGroup
			var failed atomic.Int32
			for range workers {
				wg.Go(func() {
					for range perWorker {
						if _, err := cms.Get(opCtx(t), "a", metav1.GetOptions{}); err != nil {
							failed.Add(1)
						}
					}
				})
			}
			wg.Wait()
			arrivals, _, _ := srv.counts()
			perOp := float64(arrivals["get"]) / (workers * perWorker)
			t.Logf("%s: %d Gets, %d failed, %d arrivals, %.2f per Get", tc.name, workers*perWorker, failed.Load(), arrivals["get"], perOp)
			if int(failed.Load()) != workers*perWorker {
				t.Errorf("%d of %d Gets failed when every answer is an error", failed.Load(), workers*perWorker)
			}
			if perOp > tc.maxPerOp {
				t.Errorf("%.2f arrivals per Get, want at most %.2f", perOp, tc.maxPerOp)
			}
		})
	}
}

// attemptHeader carries gotry's attempt number and kind to the server.
const attemptHeader = "X-Gotry-Attempt"

// gotry sits under client-go's QPS limiter: client-go's own retries wait
// for it, gotry's do not; gotry's retry budget is what bounds them. Forty
// Gets at QPS 20 (burst 1), each answered first by a 503 without
// Retry-After (client-go does not retry it), over gotry retrying with its
// defaults (no breaker here, so every Get is sent): the limiter holds the
// Gets to 20 a second, the server sees more, and the Gets whose retry the
// budget refused fail.
func TestKubernetesGotryRetriesBypassQPS(t *testing.T) {
	const gets, qps = 40, 20
	srv := newFakeAPIServer(t)
	var seen kubeCounter
	cms := newConfigMaps(t, srv, qps, 1, func(rt http.RoundTripper) http.RoundTripper {
		return transport.New(rt, seen.hooks(), transport.WithAttemptHeader(attemptHeader), transport.WithBackoff(resilience.Constant(0)))
	})
	if _, err := cms.Create(opCtx(t), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	srv.counts()
	// A Get's first attempt meets the 503; gotry's retry, when it sends
	// one, succeeds. gotry's attempt header tells them apart.
	srv.setPlan(func(op string, _ int, h http.Header) fault {
		if op == "get" && strings.HasPrefix(h.Get(attemptHeader), "1;") {
			return bare503
		}
		return pass
	})
	start := time.Now()
	failed := 0
	for range gets {
		if _, err := cms.Get(opCtx(t), "a", metav1.GetOptions{}); err != nil {
			failed++
		}
	}
	took := time.Since(start)
	arrivals, _, _ := srv.counts()
	retries := int(seen.retries.Load())
	t.Logf("%d Gets at QPS %d (burst 1) in %v: %d arrivals (%.1f/s against QPS %d), %d of them gotry's retries; %d Gets failed (retry refused by the budget)",
		gets, qps, took.Round(time.Millisecond), arrivals["get"], float64(arrivals["get"])/took.Seconds(), qps, retries, failed)
	if arrivals["get"] != gets+retries {
		t.Errorf("%d arrivals, want %d: each Get once through the limiter, plus gotry's %d retries", arrivals["get"], gets+retries, retries)
	}
	if retries == 0 || failed != gets-retries {
		t.Errorf("%d retries and %d failed Gets; want retries > 0 and every Get without one failed", retries, failed)
	}
	// The limiter did hold the Gets: 40 at 20/s with a burst of 1 take at
	// least 39/20 s; their arrivals came faster than that.
	if min := time.Duration(gets-1) * time.Second / qps; took < min*9/10 {
		t.Errorf("%d Gets took %v; the QPS limiter should hold them to at least %v", gets, took, min)
	}
}

// Watches are long GETs. Under the concurrency limit an informer-heavy
// client keeps many open; each must give its permit back once its
// response has arrived, or they would starve every other call. Here more
// watches than the limit's initial 20 stay open while a Get still goes
// through.
func TestKubernetesOpenWatchesLeaveTheLimitFree(t *testing.T) {
	const watches = 2 * resilience.DefaultInitialLimit
	srv := newFakeAPIServer(t)
	var tr *kubernetes.Transport
	cms := newConfigMaps(t, srv, 1000, 1000, func(rt http.RoundTripper) http.RoundTripper {
		tr = kubernetes.Wrap()(rt).(*kubernetes.Transport)
		return tr
	})
	if _, err := cms.Create(opCtx(t), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for range watches {
		w, err := cms.Watch(opCtx(t), metav1.ListOptions{})
		if err != nil {
			t.Fatalf("watch: %v", err)
		}
		t.Cleanup(w.Stop) // all stay open until the test ends
		select {
		case <-w.ResultChan():
		case <-time.After(20 * time.Second):
			t.Fatal("no event on a watch after 20s")
		}
	}
	for _, h := range tr.Stats().Hosts {
		t.Logf("%d watches open: host %s limit %d, in flight %d, shed %d", watches, h.Key, h.Limit, h.InFlight, h.Shed)
		if h.InFlight != 0 || h.Shed != 0 {
			t.Errorf("with %d watches open, %d attempts count as in flight and %d were shed; want 0 and 0", watches, h.InFlight, h.Shed)
		}
	}
	if _, err := cms.Get(opCtx(t), "a", metav1.GetOptions{}); err != nil {
		t.Errorf("get with %d watches open: %v", watches, err)
	}
}

// A create is a POST: gotry never sends it twice, even retrying with its
// defaults under client-go. Only client-go resends it, when the server
// asks with Retry-After.
func TestKubernetesGotryNeverResendsACreate(t *testing.T) {
	cases := []struct {
		name         string
		what         fault
		wantArrivals int
		wantErr      bool
	}{
		{"503 without Retry-After", bare503, 1, true},
		{"connection reset", reset, 1, true},
		{"429 with Retry-After: client-go resends", throttled, 2, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := newFakeAPIServer(t)
			var seen kubeCounter
			cms := newConfigMaps(t, srv, 1000, 1000, func(rt http.RoundTripper) http.RoundTripper {
				return transport.New(rt, seen.hooks(), transport.WithBackoff(resilience.Constant(time.Millisecond)))
			})
			srv.setPlan(func(op string, n int, _ http.Header) fault {
				if op == "create" && n == 1 {
					return tc.what
				}
				return pass
			})
			_, err := cms.Create(opCtx(t), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, metav1.CreateOptions{})
			arrivals, effects, _ := srv.counts()
			t.Logf("%s: err=%v; arrivals %s, effects %s, gotry retries %d", tc.name, err, sortedOps(arrivals), sortedOps(effects), seen.retries.Load())
			if (err != nil) != tc.wantErr {
				t.Errorf("err = %v, want an error: %v", err, tc.wantErr)
			}
			if arrivals["create"] != tc.wantArrivals || seen.retries.Load() != 0 {
				t.Errorf("%d arrivals and %d gotry retries; want %d and none", arrivals["create"], seen.retries.Load(), tc.wantArrivals)
			}
		})
	}
}
