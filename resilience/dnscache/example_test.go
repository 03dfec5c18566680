package dnscache_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/MrVSiK/gotry/resilience/dnscache"
)

// staticResolver stands in for DNS in the example.
type staticResolver map[string][]string

func (r staticResolver) LookupHost(_ context.Context, host string) ([]string, error) {
	fmt.Println("resolving", host)
	if addrs, ok := r[host]; ok {
		return addrs, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func ExampleCache() {
	dns, err := dnscache.New(dnscache.Config{
		TTL:      30 * time.Second,
		Resolver: staticResolver{"api.example.com": {"192.0.2.10", "192.0.2.11"}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	for _, host := range []string{"api.example.com", "API.Example.com.", "192.0.2.99"} {
		addrs, err := dns.LookupHost(ctx, host)
		fmt.Println(host, addrs, err)
	}
	_, err = dns.LookupHost(ctx, "nowhere.example.com")
	var dnsErr *net.DNSError
	fmt.Println("not found:", errors.As(err, &dnsErr) && dnsErr.IsNotFound)
	// Output:
	// resolving api.example.com
	// api.example.com [192.0.2.10 192.0.2.11] <nil>
	// API.Example.com. [192.0.2.10 192.0.2.11] <nil>
	// 192.0.2.99 [192.0.2.99] <nil>
	// resolving nowhere.example.com
	// not found: true
}

// DialContext drops into an http.Transport: every connection the transport
// opens resolves its host through the cache.
func ExampleCache_DialContext() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "hello")
	}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())

	dns, err := dnscache.New(dnscache.Config{
		TTL:      30 * time.Second,
		Resolver: staticResolver{"api.internal.example": {"127.0.0.1"}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	transport := &http.Transport{DialContext: dns.DialContext}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport}

	resp, err := client.Get("http://api.internal.example:" + port + "/")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(string(body))
	// Output:
	// resolving api.internal.example
	// hello
}
