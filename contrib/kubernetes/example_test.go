package kubernetes_test

import (
	"context"
	"log"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"

	"github.com/MrVSiK/gotry/contrib/kubernetes"
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
