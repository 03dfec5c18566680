package kubernetes_test

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// fault is what the fake API server does with one arrival instead of
// serving it.
type fault int

const (
	pass        fault = iota // served
	reset                    // the connection is reset before any response
	throttled                // 429 with Retry-After: 0, as priority and fairness answers
	unavailable              // 503 with Retry-After: 0
	bare503                  // 503 without Retry-After, as a proxy in front might answer
	bare429                  // 429 without Retry-After, as a rate-limiting proxy in front might answer
	// The server reads the request (a create takes effect), then resets
	// its HTTP/2 stream (RST_STREAM, INTERNAL_ERROR) instead of answering,
	// as Go's server does when a handler panics.
	streamReset
)

// kubePlan picks the fault for the n-th arrival (from 1) of operation op,
// whose request headers are h.
type kubePlan func(op string, n int, h http.Header) fault

// kubeOp names the API call a request is: create, get, list or watch of
// config maps.
func kubeOp(r *http.Request) string {
	named := strings.Count(strings.TrimPrefix(r.URL.Path, "/api/v1/namespaces/"), "/") == 2
	switch {
	case r.Method == http.MethodPost:
		return "create"
	case r.Method == http.MethodGet && r.URL.Query().Get("watch") == "true":
		return "watch"
	case r.Method == http.MethodGet && named:
		return "get"
	case r.Method == http.MethodGet:
		return "list"
	}
	return r.Method + " " + r.URL.Path
}

// fakeAPIServer serves config maps in one namespace the way the Kubernetes
// API server does over JSON (objects, lists, Status errors, a watch
// stream), on loopback, with injected faults, counting arrivals and the
// arrivals it served (effects) per operation.
type fakeAPIServer struct {
	*httptest.Server

	mu       sync.Mutex // guards the fields below
	plan     kubePlan
	arrivals map[string]int
	effects  map[string]int
	times    []time.Time // every arrival's time, for rates
	protos   map[string]int
	objects  map[string]corev1.ConfigMap
	version  int
}

const namespace = "gotry"

// newFakeAPIServer serves over plain HTTP/1.1.
func newFakeAPIServer(t testing.TB) *fakeAPIServer { return startFakeAPIServer(t, false) }

// newFakeAPIServerH2 serves over TLS with HTTP/2, as an API server does;
// newConfigMaps trusts its certificate.
func newFakeAPIServerH2(t testing.TB) *fakeAPIServer { return startFakeAPIServer(t, true) }

func startFakeAPIServer(t testing.TB, h2 bool) *fakeAPIServer {
	t.Helper()
	s := &fakeAPIServer{
		plan:     func(string, int, http.Header) fault { return pass },
		arrivals: map[string]int{},
		effects:  map[string]int{},
		protos:   map[string]int{},
		objects:  map[string]corev1.ConfigMap{},
	}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.Config.ErrorLog = log.New(io.Discard, "", 0)
	if h2 {
		s.EnableHTTP2 = true
		s.StartTLS()
	} else {
		s.Start()
	}
	t.Cleanup(s.Close)
	return s
}

// protocols returns how many arrivals came over each protocol ("HTTP/2.0").
func (s *fakeAPIServer) protocols() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.protos)
}

func (s *fakeAPIServer) setPlan(p kubePlan) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.plan = p
}

// counts returns the arrivals and effects so far and the arrival times,
// and starts them again from zero.
func (s *fakeAPIServer) counts() (arrivals, effects map[string]int, times []time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	arrivals, effects, times = s.arrivals, s.effects, s.times
	s.arrivals, s.effects, s.times = map[string]int{}, map[string]int{}, nil
	return arrivals, effects, times
}

func (s *fakeAPIServer) serve(w http.ResponseWriter, r *http.Request) {
	op := kubeOp(r)
	s.mu.Lock()
	s.arrivals[op]++
	s.protos[r.Proto]++
	s.times = append(s.times, time.Now())
	what := s.plan(op, s.arrivals[op], r.Header)
	if what == pass {
		s.effects[op]++
	}
	s.mu.Unlock()

	switch what {
	case throttled:
		w.Header().Set("Retry-After", "0")
		writeStatus(w, http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests, "too many requests, please try again later")
		return
	case unavailable:
		w.Header().Set("Retry-After", "0")
		writeStatus(w, http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable, "the server is currently unable to handle the request")
		return
	case bare503:
		writeStatus(w, http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable, "no healthy upstream")
		return
	case bare429:
		writeStatus(w, http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests, "rate limited")
		return
	case reset:
		resetConn(w)
		return
	case streamReset:
		if op == "create" {
			var cm corev1.ConfigMap
			if err := json.NewDecoder(r.Body).Decode(&cm); err == nil {
				if _, exists := s.store(cm); !exists {
					s.mu.Lock()
					s.effects[op]++
					s.mu.Unlock()
				}
			}
		}
		panic(http.ErrAbortHandler) // over HTTP/2: RST_STREAM, no answer
	case pass:
	default:
		panic("fakeAPIServer: no such fault " + strconv.Itoa(int(what)))
	}

	name := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
	switch op {
	case "create":
		var cm corev1.ConfigMap
		if err := json.NewDecoder(r.Body).Decode(&cm); err != nil {
			writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, err.Error())
			return
		}
		cm, exists := s.store(cm)
		if exists {
			writeStatus(w, http.StatusConflict, metav1.StatusReasonAlreadyExists, "configmaps \""+cm.Name+"\" already exists")
			return
		}
		writeObject(w, http.StatusCreated, configMap(cm))
	case "get":
		s.mu.Lock()
		cm, ok := s.objects[name]
		s.mu.Unlock()
		if !ok {
			writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, "configmaps \""+name+"\" not found")
			return
		}
		writeObject(w, http.StatusOK, configMap(cm))
	case "list":
		list := corev1.ConfigMapList{TypeMeta: metav1.TypeMeta{Kind: "ConfigMapList", APIVersion: "v1"}}
		s.mu.Lock()
		for _, cm := range s.objects {
			list.Items = append(list.Items, configMap(cm))
		}
		list.ResourceVersion = strconv.Itoa(s.version)
		s.mu.Unlock()
		writeObject(w, http.StatusOK, list)
	case "watch":
		s.watch(w, r)
	default:
		writeStatus(w, http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed, op)
	}
}

// store creates cm unless a config map of its name exists, and returns it
// as stored, or reports that it exists.
func (s *fakeAPIServer) store(cm corev1.ConfigMap) (corev1.ConfigMap, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, exists := s.objects[cm.Name]; exists {
		return cm, true
	}
	s.version++
	cm.ResourceVersion = strconv.Itoa(s.version)
	cm.Namespace = namespace
	s.objects[cm.Name] = cm
	return cm, false
}

// watch streams an ADDED event for every config map, then holds the
// stream open until the client leaves, as the API server does.
func (s *fakeAPIServer) watch(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	s.mu.Lock()
	var events []metav1.WatchEvent
	for _, cm := range s.objects {
		raw, err := json.Marshal(configMap(cm))
		if err != nil {
			panic(err)
		}
		events = append(events, metav1.WatchEvent{Type: "ADDED", Object: runtime.RawExtension{Raw: raw}})
	}
	s.mu.Unlock()
	enc := json.NewEncoder(w)
	for _, e := range events {
		if err := enc.Encode(e); err != nil {
			return
		}
	}
	http.NewResponseController(w).Flush()
	<-r.Context().Done()
}

func configMap(cm corev1.ConfigMap) corev1.ConfigMap {
	cm.TypeMeta = metav1.TypeMeta{Kind: "ConfigMap", APIVersion: "v1"}
	return cm
}

func writeObject(w http.ResponseWriter, code int, obj any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	if err := json.NewEncoder(w).Encode(obj); err != nil {
		panic(http.ErrAbortHandler)
	}
}

// writeStatus answers with a metav1.Status, the API server's error body.
func writeStatus(w http.ResponseWriter, code int, reason metav1.StatusReason, msg string) {
	st := metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure,
		Message:  msg,
		Reason:   reason,
		Code:     int32(code),
	}
	if w.Header().Get("Retry-After") != "" {
		st.Details = &metav1.StatusDetails{RetryAfterSeconds: 0}
	}
	writeObject(w, code, st)
}

// resetConn takes over the connection and closes it with SO_LINGER 0, so
// the client sees a TCP reset, not an orderly close.
func resetConn(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler) // cannot hijack (HTTP/2): abort the stream instead
	}
	raw := conn
	if tc, ok := conn.(*tls.Conn); ok {
		raw = tc.NetConn()
	}
	if tcp, ok := raw.(*net.TCPConn); ok {
		_ = tcp.SetLinger(0) // best effort: a plain close still fails the request
	}
	_ = conn.Close() // the reset is the point; its error says nothing new
}

// sortedOps renders counts in a stable order for the test log.
func sortedOps(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%d ", k, m[k])
	}
	return strings.TrimSpace(b.String())
}
