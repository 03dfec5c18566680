package dnscache_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/MrVSiK/gotry/resilience/dnscache"
)

// waitLimit bounds the real-time waits of the test that uses the network; it
// is a safety net for a broken implementation, never a means of
// synchronisation.
const waitLimit = 5 * time.Second

// fakeResolver answers from a table and records every query. When gate is
// set, each query waits for it to close first.
type fakeResolver struct {
	hosts map[string][]string
	gate  chan struct{}

	mu      sync.Mutex
	queries []string
}

func (r *fakeResolver) LookupHost(ctx context.Context, host string) ([]string, error) {
	r.mu.Lock()
	r.queries = append(r.queries, host)
	r.mu.Unlock()
	if r.gate != nil {
		select {
		case <-r.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	addrs, ok := r.hosts[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return slices.Clone(addrs), nil
}

func (r *fakeResolver) Queries() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.queries)
}

func mustCache(t testing.TB, cfg dnscache.Config) *dnscache.Cache {
	t.Helper()
	d, err := dnscache.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return d
}

func TestNewRejectsInvalidConfig(t *testing.T) {
	tests := []struct {
		name   string
		cfg    dnscache.Config
		option string
	}{
		{"negative TTL", dnscache.Config{TTL: -1}, "TTL"},
		{"negative max entries", dnscache.Config{MaxEntries: -1}, "MaxEntries"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := dnscache.New(tt.cfg)
			var ce *dnscache.ConfigError
			if !errors.As(err, &ce) || ce.Option != tt.option || ce.Config != "dnscache.Config" {
				t.Fatalf("New error = %v, want a *ConfigError naming dnscache.Config.%s", err, tt.option)
			}
		})
	}
}

func TestCacheNamesMatchCaseInsensitivelyWithOrWithoutTrailingDot(t *testing.T) {
	r := &fakeResolver{hosts: map[string][]string{"example.com": {"192.0.2.1", "192.0.2.2"}}}
	d := mustCache(t, dnscache.Config{Resolver: r})
	for _, host := range []string{"example.com", "EXAMPLE.com", "example.com.", "Example.COM."} {
		addrs, err := d.LookupHost(context.Background(), host)
		if err != nil || !slices.Equal(addrs, []string{"192.0.2.1", "192.0.2.2"}) {
			t.Errorf("LookupHost(%q) = %v, %v", host, addrs, err)
		}
	}
	if q := r.Queries(); !slices.Equal(q, []string{"example.com"}) {
		t.Errorf("resolver queries = %q, want one for the canonical name", q)
	}
}

func TestCacheReturnsIPLiteralsWithoutLookup(t *testing.T) {
	r := &fakeResolver{}
	d := mustCache(t, dnscache.Config{Resolver: r})
	for _, host := range []string{"127.0.0.1", "::1", "2001:DB8::1", "fe80::1%eth0", "::ffff:10.0.0.1"} {
		addrs, err := d.LookupHost(context.Background(), host)
		if err != nil || !slices.Equal(addrs, []string{host}) {
			t.Errorf("LookupHost(%q) = %v, %v; want the literal back", host, addrs, err)
		}
	}
	if q := r.Queries(); len(q) != 0 {
		t.Errorf("resolver was queried for %q", q)
	}
}

func TestCacheFailuresAreNotCachedAndKeepTheirType(t *testing.T) {
	tests := []struct {
		name  string
		hosts map[string][]string
	}{
		{"resolver reports not found", nil},
		{"resolver finds no address", map[string][]string{"missing.test": {}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &fakeResolver{hosts: tt.hosts}
			d := mustCache(t, dnscache.Config{Resolver: r})
			for range 2 {
				_, err := d.LookupHost(context.Background(), "missing.test")
				var dnsErr *net.DNSError
				if !errors.As(err, &dnsErr) || !dnsErr.IsNotFound {
					t.Fatalf("LookupHost error = %#v, want a *net.DNSError with IsNotFound", err)
				}
			}
			if q := r.Queries(); len(q) != 2 {
				t.Errorf("resolver queried %d times, want 2 (failures are not cached)", len(q))
			}
		})
	}
}

func TestCacheEmptyHostIsNotFound(t *testing.T) {
	r := &fakeResolver{}
	d := mustCache(t, dnscache.Config{Resolver: r})
	for _, host := range []string{"", "."} {
		_, err := d.LookupHost(context.Background(), host)
		var dnsErr *net.DNSError
		if !errors.As(err, &dnsErr) || !dnsErr.IsNotFound {
			t.Errorf("LookupHost(%q) error = %v, want not found", host, err)
		}
	}
	if q := r.Queries(); len(q) != 0 {
		t.Errorf("resolver was queried for %q", q)
	}
}

// The cache tells the time with the real clock, which inside a synctest
// bubble is a fake one: time.Sleep there advances it at once, exactly, and
// without waiting in real time.
func TestCacheExpiresAfterTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = 30 * time.Second
		r := &fakeResolver{hosts: map[string][]string{"svc.test": {"192.0.2.7"}}}
		d := mustCache(t, dnscache.Config{Resolver: r, TTL: ttl})
		steps := []struct {
			advance time.Duration
			queries int
		}{
			{0, 1},
			{ttl - time.Nanosecond, 1},
			{time.Nanosecond, 2},
		}
		for i, s := range steps {
			time.Sleep(s.advance)
			if _, err := d.LookupHost(context.Background(), "svc.test"); err != nil {
				t.Fatal(err)
			}
			if q := r.Queries(); len(q) != s.queries {
				t.Errorf("step %d: %d queries, want %d", i, len(q), s.queries)
			}
		}
	})
}

func TestCacheDefaultTTLIsOneMinute(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &fakeResolver{hosts: map[string][]string{"svc.test": {"192.0.2.7"}}}
		d := mustCache(t, dnscache.Config{Resolver: r})
		for _, advance := range []time.Duration{0, time.Minute - time.Nanosecond, time.Nanosecond} {
			time.Sleep(advance)
			if _, err := d.LookupHost(context.Background(), "svc.test"); err != nil {
				t.Fatal(err)
			}
		}
		if q := r.Queries(); len(q) != 2 {
			t.Errorf("%d queries over one minute, want 2 (one before, one after expiry)", len(q))
		}
	})
}

func TestCacheLookupReturnsTheCallersOwnCopy(t *testing.T) {
	r := &fakeResolver{hosts: map[string][]string{"svc.test": {"192.0.2.1", "192.0.2.2"}}}
	d := mustCache(t, dnscache.Config{Resolver: r})
	first, err := d.LookupHost(context.Background(), "svc.test")
	if err != nil {
		t.Fatal(err)
	}
	first[0] = "tampered"
	second, err := d.LookupHost(context.Background(), "svc.test")
	if err != nil || !slices.Equal(second, []string{"192.0.2.1", "192.0.2.2"}) {
		t.Errorf("LookupHost after the caller modified its result = %v, %v", second, err)
	}
}

func TestCacheConcurrentLookupsShareOneQuery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const callers = 100
		r := &fakeResolver{hosts: map[string][]string{"svc.test": {"192.0.2.9"}}, gate: make(chan struct{})}
		d := mustCache(t, dnscache.Config{Resolver: r})
		errs := make(chan error, callers)
		for range callers {
			go func() {
				addrs, err := d.LookupHost(context.Background(), "SVC.test.")
				if err == nil && !slices.Equal(addrs, []string{"192.0.2.9"}) {
					err = errors.New("wrong addresses")
				}
				errs <- err
			}()
		}
		// Every caller is now blocked: one query waits at the gate, and
		// the callers wait for it (or, without single flight, for queries
		// of their own).
		synctest.Wait()
		if q := r.Queries(); len(q) != 1 {
			t.Errorf("%d callers in flight caused %d queries, want 1", callers, len(q))
		}
		close(r.gate)
		for range callers {
			if err := <-errs; err != nil {
				t.Error(err)
			}
		}
	})
}

// dialRecorder stands in for the network: it records every address dialled
// and connects only to those in ok, over an in-memory pipe.
type dialRecorder struct {
	ok map[string]bool

	mu     sync.Mutex
	dialed []string
	conns  []net.Conn
}

var errRefused = errors.New("connection refused (fake)")

func (d *dialRecorder) dial(_ context.Context, network, address string) (net.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dialed = append(d.dialed, network+" "+address)
	if !d.ok[address] {
		return nil, &net.OpError{Op: "dial", Net: network, Err: errRefused}
	}
	a, b := net.Pipe()
	d.conns = append(d.conns, a, b)
	return a, nil
}

func (d *dialRecorder) close() {
	for _, c := range d.conns {
		c.Close()
	}
}

func TestCacheDialContext(t *testing.T) {
	hosts := map[string][]string{
		"multi.test": {"192.0.2.1", "2001:db8::1", "192.0.2.2", "192.0.2.3"},
		"v4.test":    {"192.0.2.1"},
	}
	tests := []struct {
		name    string
		network string
		address string
		ok      []string
		dialed  []string
		wantErr error // matched with errors.Is; nil means success
	}{
		{
			name: "tries addresses in order until one connects", network: "tcp", address: "multi.test:443",
			ok:     []string{"192.0.2.2:443"},
			dialed: []string{"tcp 192.0.2.1:443", "tcp [2001:db8::1]:443", "tcp 192.0.2.2:443"},
		},
		{
			name: "returns the first error when every address fails", network: "tcp", address: "multi.test:443",
			dialed:  []string{"tcp 192.0.2.1:443", "tcp [2001:db8::1]:443", "tcp 192.0.2.2:443", "tcp 192.0.2.3:443"},
			wantErr: errRefused,
		},
		{
			name: "tcp4 skips IPv6 addresses", network: "tcp4", address: "multi.test:80",
			ok:     []string{"192.0.2.2:80"},
			dialed: []string{"tcp4 192.0.2.1:80", "tcp4 192.0.2.2:80"},
		},
		{
			name: "tcp6 skips IPv4 addresses", network: "tcp6", address: "multi.test:80",
			ok:     []string{"[2001:db8::1]:80"},
			dialed: []string{"tcp6 [2001:db8::1]:80"},
		},
		{
			name: "IP literal goes straight to the dialer", network: "tcp", address: "127.0.0.1:8080",
			ok:     []string{"127.0.0.1:8080"},
			dialed: []string{"tcp 127.0.0.1:8080"},
		},
		{
			name: "other networks go straight to the dialer", network: "unix", address: "/tmp/sock",
			ok:     []string{"/tmp/sock"},
			dialed: []string{"unix /tmp/sock"},
		},
		{
			name: "host name case and trailing dot are ignored", network: "udp", address: "V4.Test.:53",
			ok:     []string{"192.0.2.1:53"},
			dialed: []string{"udp 192.0.2.1:53"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &dialRecorder{ok: map[string]bool{}}
			defer rec.close()
			for _, a := range tt.ok {
				rec.ok[a] = true
			}
			d := mustCache(t, dnscache.ConfigWithDial(
				dnscache.Config{Resolver: &fakeResolver{hosts: hosts}}, rec.dial))
			conn, err := d.DialContext(context.Background(), tt.network, tt.address)
			switch {
			case tt.wantErr == nil && (err != nil || conn == nil):
				t.Errorf("DialContext = %v, %v; want a connection", conn, err)
			case tt.wantErr != nil && !errors.Is(err, tt.wantErr):
				t.Errorf("DialContext error = %v, want %v", err, tt.wantErr)
			}
			if !slices.Equal(rec.dialed, tt.dialed) {
				t.Errorf("dialled %q, want %q", rec.dialed, tt.dialed)
			}
		})
	}
}

func TestCacheDialContextErrors(t *testing.T) {
	tests := []struct {
		name    string
		network string
		address string
		check   func(error) bool
	}{
		{"lookup failure keeps the DNS error", "tcp", "missing.test:80", func(err error) bool {
			var dnsErr *net.DNSError
			var opErr *net.OpError
			return errors.As(err, &dnsErr) && dnsErr.IsNotFound && errors.As(err, &opErr) && opErr.Op == "dial"
		}},
		{"no address of the family", "tcp6", "v4.test:80", func(err error) bool {
			var addrErr *net.AddrError
			return errors.As(err, &addrErr)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &dialRecorder{}
			d := mustCache(t, dnscache.ConfigWithDial(dnscache.Config{
				Resolver: &fakeResolver{hosts: map[string][]string{"v4.test": {"192.0.2.1"}}},
			}, rec.dial))
			conn, err := d.DialContext(context.Background(), tt.network, tt.address)
			if conn != nil || !tt.check(err) {
				t.Errorf("DialContext = %v, %#v", conn, err)
			}
			if len(rec.dialed) != 0 {
				t.Errorf("dialled %q, want nothing", rec.dialed)
			}
		})
	}
}

func TestCachePlugsIntoHTTPTransport(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "hello")
	}))
	defer srv.Close()
	_, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}

	r := &fakeResolver{hosts: map[string][]string{"api.internal.test": {"127.0.0.1"}}}
	var mu sync.Mutex
	var controlled []string // addresses the configured Dialer was used for
	d := mustCache(t, dnscache.Config{
		Resolver: r,
		Dialer: &net.Dialer{Timeout: waitLimit, Control: func(_, address string, _ syscall.RawConn) error {
			mu.Lock()
			defer mu.Unlock()
			controlled = append(controlled, address)
			return nil
		}},
	})
	tr := &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: waitLimit}

	for range 2 {
		resp, err := client.Get("http://api.internal.test:" + port + "/")
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || string(body) != "hello" {
			t.Fatalf("body = %q, %v", body, err)
		}
	}
	if q := r.Queries(); len(q) != 1 {
		t.Errorf("two requests caused %d lookups, want 1", len(q))
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"127.0.0.1:" + port, "127.0.0.1:" + port}
	if !slices.Equal(controlled, want) {
		t.Errorf("configured Dialer dialled %q, want %q", controlled, want)
	}
}

func BenchmarkCacheLookupHostHit(b *testing.B) {
	r := &fakeResolver{hosts: map[string][]string{"api.example.com": {"192.0.2.1", "192.0.2.2"}}}
	d := mustCache(b, dnscache.Config{Resolver: r})
	ctx := context.Background()
	if _, err := d.LookupHost(ctx, "api.example.com"); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := d.LookupHost(ctx, "api.example.com"); err != nil {
			b.Fatal(err)
		}
	}
}
