package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// attrClientGone (invented, demo only) marks a server span whose client
// went away before the answer: a hedge loser or a timed-out attempt.
const attrClientGone = attribute.Key("demo.client_gone")

// AttemptHeader is the header the demo's transport sends on every attempt
// (transport.WithAttemptHeader), e.g. "2; retry", and the upstream reads:
// it counts the attempts it sees by kind and puts the value on its SERVER
// span (attrAttempt).
const AttemptHeader = "Gotry-Attempt"

// attrAttempt (invented, demo only) is the attempt header's value on the
// upstream's SERVER span: the server sees which attempt it is answering.
const attrAttempt = attribute.Key("demo.gotry_attempt")

// attemptKinds are the kinds the attempt header names, in Seen's order.
var attemptKinds = [...]string{"initial", "retry", "hedge"}

// defaultHosts are the upstream's virtual hosts.
var defaultHosts = []string{"inventory", "payments", "search", chainHost}

// DefaultHosts returns the names of the demo's virtual hosts.
func DefaultHosts() []string { return append([]string(nil), defaultHosts...) }

// UpstreamConfig configures StartUpstream.
type UpstreamConfig struct {
	// Listen is the address the first host listens on (default
	// "127.0.0.1:0"). With port 0 every host gets a random port; with
	// port P the hosts get P, P+1, ...
	Listen string
	Hosts  []string // default DefaultHosts()
	Faults Faults
	Outage Outage
	Burst  Burst
	Drop   Drop
	Seed   uint64
	// TracerProvider, when set, gives every request a SERVER span (otelhttp)
	// that joins the client's trace through the W3C traceparent header.
	TracerProvider trace.TracerProvider
}

// Upstream is the flaky server: one listener per virtual host. Its methods
// are safe for concurrent use.
type Upstream struct {
	hosts []*vhost
	byKey map[string]*vhost // "name:80" -> host, for DialContext
	start time.Time
	wg    sync.WaitGroup // one per Serve goroutine
	stop  chan struct{}  // closed by Shutdown: queued and capped requests end at once
	once  sync.Once      // closes stop
	// closeChain closes the idle connections of the chain service's
	// transport (see chainService); nil without it.
	closeChain func()
}

// vhost is one virtual host: a listener, a server and its fault dice.
type vhost struct {
	name   string
	ln     net.Listener
	srv    *http.Server
	faults Faults
	// service, when set, answers instead of the dice: chainHost's
	// service (see chainService).
	service http.Handler
	outage  Outage
	burst   Burst
	drop    Drop
	start   time.Time
	stop    <-chan struct{} // the Upstream's

	// slots holds a token per request in service under the capacity drop:
	// a request blocked sending to it waits in the channel's queue, which
	// the runtime serves first in, first out. queued counts the requests
	// waiting or in service, bounded by Capacity+Queue.
	slots  chan struct{}
	queued atomic.Int64

	mu  sync.Mutex // guards rng
	rng *rand.Rand

	served [numFaults]atomic.Int64         // requests answered, by fault
	seen   [len(attemptKinds)]atomic.Int64 // requests by the attempt header's kind
}

// StartUpstream starts a listener and server per host. Stop it with
// Shutdown.
func StartUpstream(cfg UpstreamConfig) (*Upstream, error) {
	if err := cfg.Faults.validate(); err != nil {
		return nil, err
	}
	if err := cfg.Outage.validate(); err != nil {
		return nil, err
	}
	if err := cfg.Burst.validate(); err != nil {
		return nil, err
	}
	if err := cfg.Drop.validate(); err != nil {
		return nil, err
	}
	hosts := cfg.Hosts
	if len(hosts) == 0 {
		hosts = defaultHosts
	}
	listen := cfg.Listen
	if listen == "" {
		listen = "127.0.0.1:0"
	}
	ip, portStr, err := net.SplitHostPort(listen)
	if err != nil {
		return nil, fmt.Errorf("demo: upstream listen address %q: %w", listen, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, fmt.Errorf("demo: upstream listen port %q: %w", portStr, err)
	}
	u := &Upstream{byKey: map[string]*vhost{}, start: time.Now(), stop: make(chan struct{})}
	for i, name := range hosts {
		p := 0
		if port != 0 {
			p = port + i
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(p)))
		if err != nil {
			u.close()
			return nil, fmt.Errorf("demo: upstream %s: %w", name, err)
		}
		h := &vhost{
			name: name, ln: ln, faults: cfg.Faults, outage: cfg.Outage, burst: cfg.Burst, drop: cfg.Drop,
			start: u.start, stop: u.stop, slots: make(chan struct{}, max(cfg.Drop.Capacity, 1)),
			rng: rand.New(rand.NewPCG(cfg.Seed, uint64(i)+1)),
		}
		if name == chainHost && slices.Contains(hosts, chainCallee) {
			h.service, u.closeChain = chainService(u.DialContext)
		}
		var handler http.Handler = h
		if cfg.TracerProvider != nil {
			handler = otelhttp.NewHandler(h, name,
				otelhttp.WithTracerProvider(cfg.TracerProvider),
				otelhttp.WithMeterProvider(noop.NewMeterProvider()),
				otelhttp.WithPropagators(propagation.TraceContext{}))
		}
		h.srv = &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second}
		u.hosts = append(u.hosts, h)
		u.byKey[name+":80"] = h
	}
	for _, h := range u.hosts {
		u.wg.Add(1)
		go func() {
			defer u.wg.Done()
			_ = h.srv.Serve(h.ln) // returns http.ErrServerClosed on Shutdown
		}()
	}
	return u, nil
}

// close closes the listeners of a partly built Upstream.
func (u *Upstream) close() {
	for _, h := range u.hosts {
		h.ln.Close()
	}
}

// Host is a virtual host and the real address it listens on.
type Host struct {
	Name string
	Addr string // 127.0.0.1:port
}

// Hosts lists the virtual hosts in order.
func (u *Upstream) Hosts() []Host {
	out := make([]Host, len(u.hosts))
	for i, h := range u.hosts {
		out[i] = Host{Name: h.name, Addr: h.ln.Addr().String()}
	}
	return out
}

// Started is when the upstream started; outages are timed from it.
func (u *Upstream) Started() time.Time { return u.start }

// DialContext dials the listener of the virtual host in addr ("payments:80");
// any other address is an error. Use it as http.Transport.DialContext.
func (u *Upstream) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	h, ok := u.byKey[addr]
	if !ok {
		return nil, &net.OpError{Op: "dial", Net: network, Err: fmt.Errorf("demo: no virtual host %q", addr)}
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", h.ln.Addr().String())
}

// Served returns how many requests each host answered, by fault name.
func (u *Upstream) Served() map[string]map[string]int64 {
	out := map[string]map[string]int64{}
	for _, h := range u.hosts {
		m := map[string]int64{}
		for f := fault(0); f < numFaults; f++ {
			if n := h.served[f].Load(); n > 0 {
				m[f.String()] = n
			}
		}
		out[h.name] = m
	}
	return out
}

// Seen returns how many requests the upstream saw of each attempt kind,
// read from AttemptHeader: "initial", "retry", "hedge".
func (u *Upstream) Seen() map[string]int64 {
	out := map[string]int64{}
	for _, h := range u.hosts {
		for i, k := range attemptKinds {
			out[k] += h.seen[i].Load()
		}
	}
	return out
}

// servedTotals sums Served over hosts, by fault.
func (u *Upstream) servedTotals() [numFaults]int64 {
	var out [numFaults]int64
	for _, h := range u.hosts {
		for f := range out {
			out[f] += h.served[f].Load()
		}
	}
	return out
}

// OutageActive reports whether host is in an outage now.
func (u *Upstream) OutageActive(host string, now time.Time) bool {
	for _, h := range u.hosts {
		if h.name == host {
			return h.outage.Active(host, now.Sub(u.start))
		}
	}
	return false
}

// DropActive reports whether host's capacity is down now.
func (u *Upstream) DropActive(host string, now time.Time) bool {
	for _, h := range u.hosts {
		if h.name == host {
			return h.drop.Active(host, now.Sub(u.start))
		}
	}
	return false
}

// Shutdown stops every server: it ends the requests queued under a
// capacity drop, stops accepting, waits for handlers until ctx ends, then
// closes what is left, and waits for the Serve goroutines.
func (u *Upstream) Shutdown(ctx context.Context) error {
	u.once.Do(func() { close(u.stop) })
	var errs []error
	for _, h := range u.hosts {
		if err := h.srv.Shutdown(ctx); err != nil {
			h.srv.Close()
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				errs = append(errs, err)
			}
		}
	}
	u.wg.Wait()
	if u.closeChain != nil {
		u.closeChain()
	}
	return errors.Join(errs...)
}

// roll draws a fault and its latency for one request.
func (h *vhost) roll(now time.Time) (fault, time.Duration) {
	elapsed := now.Sub(h.start)
	if h.outage.Active(h.name, elapsed) {
		return faultOutage, 0
	}
	h.mu.Lock()
	u1, u2 := h.rng.Float64(), h.rng.Float64()
	burst := h.burst.Active(elapsed) && h.rng.Float64() < h.burst.Share
	h.mu.Unlock()
	if burst {
		return faultBurst, 0
	}
	f := h.faults.pick(u1)
	return f, h.faults.latency(f, u2)
}

// ServeHTTP answers one request according to the dice.
func (h *vhost) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
	h.countAttempt(r)
	if h.service != nil {
		h.service.ServeHTTP(w, r)
		return
	}
	now := time.Now()
	f, d := h.roll(now)
	if (f == faultNone || f == faultSlow) && h.drop.Active(h.name, now.Sub(h.start)) {
		if !h.serveCapped() {
			h.served[faultQueueFull].Add(1)
			writeJSON(w, http.StatusServiceUnavailable, `{"error":"queue full"}`)
			return
		}
		h.served[faultCapped].Add(1)
		if r.Context().Err() != nil {
			trace.SpanFromContext(r.Context()).SetAttributes(attrClientGone.Bool(true))
			return
		}
		writeJSON(w, http.StatusOK, `{"host":"`+h.name+`","ok":true}`)
		return
	}
	h.served[f].Add(1)
	switch f {
	case faultReset:
		resetConn(w)
		return
	case faultOutage, faultBurst, fault503:
		writeJSON(w, http.StatusServiceUnavailable, `{"error":"unavailable"}`)
		return
	case fault429:
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusTooManyRequests, `{"error":"slow down"}`)
		return
	}
	if d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-r.Context().Done(): // hedge loser or per-attempt timeout
			t.Stop()
			trace.SpanFromContext(r.Context()).SetAttributes(attrClientGone.Bool(true))
			return
		}
	}
	writeJSON(w, http.StatusOK, `{"host":"`+h.name+`","ok":true}`)
}

// serveCapped serves one request under the capacity drop: it waits for its
// turn in the FIFO queue, then takes the drop's Service time, whether or not
// its client is still there (the server does not know). It reports false,
// having waited for nothing, when the queue is full. Shutdown ends the wait
// and the service at once.
func (h *vhost) serveCapped() bool {
	if h.queued.Add(1) > int64(h.drop.Capacity+h.drop.Queue) {
		h.queued.Add(-1)
		return false
	}
	defer h.queued.Add(-1)
	select {
	case h.slots <- struct{}{}:
	case <-h.stop:
		return true
	}
	defer func() { <-h.slots }()
	t := time.NewTimer(h.drop.Service)
	defer t.Stop()
	select {
	case <-t.C:
	case <-h.stop:
	}
	return true
}

// countAttempt counts r by the kind its attempt header names and puts the
// header on the request's SERVER span.
func (h *vhost) countAttempt(r *http.Request) {
	v := r.Header.Get(AttemptHeader)
	if v == "" {
		return
	}
	trace.SpanFromContext(r.Context()).SetAttributes(attrAttempt.String(v))
	_, kind, _ := strings.Cut(v, "; ")
	for i, k := range attemptKinds {
		if k == kind {
			h.seen[i].Add(1)
		}
	}
}

func writeJSON(w http.ResponseWriter, code int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(code)
	_, _ = io.WriteString(w, body)
}

// resetConn aborts the connection with a TCP RST (linger 0), so the client
// sees "connection reset by peer".
func resetConn(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler) // closes the connection without a response
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	conn.Close()
}

// ServeUpstream runs only the flaky upstream, printing each host's URL to
// out, until ctx ends or d passes (d 0: until ctx ends), then shuts it down.
func ServeUpstream(ctx context.Context, cfg UpstreamConfig, d time.Duration, out io.Writer) error {
	u, err := StartUpstream(cfg)
	if err != nil {
		return err
	}
	for _, h := range u.Hosts() {
		fmt.Fprintf(out, "%-10s http://%s/\n", h.Name, h.Addr)
	}
	if o := cfg.Outage; o.Host != "" && o.For > 0 {
		fmt.Fprintf(out, "outage: %s answers 503 for %v every %v from %v\n", o.Host, o.For, o.Every, o.Start)
	}
	if b := cfg.Burst; b.Share > 0 && b.For > 0 {
		fmt.Fprintf(out, "burst: every host answers 503 to %g%% of requests for %v every %v from %v\n", 100*b.Share, b.For, b.Every, b.Start)
	}
	if d := cfg.Drop; d.Host != "" && d.For > 0 {
		fmt.Fprintf(out, "capacity drop: %s serves %d at a time, %v each, for %v every %v from %v\n", d.Host, d.Capacity, d.Service, d.For, d.Every, d.Start)
	}
	if d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	return u.Shutdown(sctx)
}
