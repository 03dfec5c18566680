package kubernetes_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"

	"github.com/MrVSiK/gotry/contrib/kubernetes"
	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
	"github.com/MrVSiK/gotry/transport/transporttest"
)

// client-go over gotry: client-go retries what the API server asks it to
// (429 and 5xx with Retry-After, any verb), through its QPS limiter, and
// gotry sends each of its requests once, with a breaker (which client-go
// does not retry past) and a concurrency limit (and, given telemetry's
// option, telemetry of every request). rest.Config.Wrap keeps any wrapper
// the config already had. It needs a cluster, so it is built but not run.
func ExampleWrap() {
	cfg, err := rest.InClusterConfig()
	if err != nil {
		log.Fatal(err)
	}
	// Telemetry of every attempt: pass telemetry.New().Transport()
	// (package github.com/MrVSiK/gotry/telemetry) to Wrap.
	cfg.Wrap(kubernetes.Wrap())
	core, err := corev1client.NewForConfig(cfg)
	if err != nil {
		log.Fatal(err)
	}
	_, err = core.ConfigMaps("default").Get(context.Background(), "settings", metav1.GetOptions{})
	if err != nil {
		log.Fatal(err)
	}
}

// Classifier, in the transport Wrap makes, keeps gotry from retrying a 429
// even for a request whose Policy allows it more attempts: client-go waits
// the Retry-After and sends again itself, through its QPS limiter. A 503
// without Retry-After is still gotry's to retry under such a Policy. A
// scripted RoundTripper (package transporttest) stands in for the API
// server.
func ExampleClassifier() {
	const configMaps = "/api/v1/namespaces/default/configmaps/"
	rt := transporttest.New(nil)
	rt.Handle("GET "+configMaps+"throttled", transporttest.Steps(
		transporttest.Status(http.StatusTooManyRequests).WithHeader("Retry-After", "1")))
	rt.Handle("GET "+configMaps+"flaky", transporttest.Steps(
		transporttest.Status(http.StatusServiceUnavailable),
		transporttest.Status(http.StatusOK)))
	client := &http.Client{Transport: kubernetes.Wrap(
		transport.WithBackoff(resilience.Constant(0)), // no sleep between gotry's attempts here
	)(rt)}

	ctx := transport.WithPolicy(context.Background(), transport.Policy{MaxAttempts: 3})
	for _, name := range []string{"throttled", "flaky"} {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://kube.test"+configMaps+name, nil)
		if err != nil {
			log.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		resp.Body.Close()
		attempts := 0
		for _, r := range rt.Requests() {
			if strings.HasSuffix(r.URL.Path, "/"+name) {
				attempts++
			}
		}
		fmt.Printf("%s: %d after %d attempt(s)\n", name, resp.StatusCode, attempts)
	}
	// Output:
	// throttled: 429 after 1 attempt(s)
	// flaky: 200 after 2 attempt(s)
}
