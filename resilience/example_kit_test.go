package resilience_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/MrVSiK/gotry/resilience"
)

func ExampleSchedule() {
	s, err := resilience.NewSchedule(resilience.ScheduleConfig{
		Base:     100 * time.Millisecond,
		Factor:   2,
		MaxDelay: time.Second,
		// Jitter is left at 0 so the output is predictable; real code
		// sets it, or picks JitterFull.
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for range 6 {
		fmt.Println(s.Next()) // a retry loop would sleep this long
	}
	s.Reset() // after a success

	// The same Schedule is a stateless Backoff for the engine.
	var b resilience.Backoff = s
	fmt.Println("retry 3:", b.Delay(3, 0))
	// Output:
	// 100ms
	// 200ms
	// 400ms
	// 800ms
	// 1s
	// 1s
	// retry 3: 400ms
}

func ExampleAddJitter() {
	// Pace a poll at one minute plus up to five seconds, so a fleet of
	// pollers does not fire in lockstep.
	d := resilience.AddJitter(time.Minute, 5*time.Second)
	fmt.Println(d >= time.Minute && d < time.Minute+5*time.Second)
	// Output: true
}

func ExamplePeriodic() {
	calls := 0
	third := make(chan struct{})
	refresh := func(ctx context.Context) error {
		calls++
		switch calls {
		case 2:
			return errors.New("upstream unavailable")
		case 3:
			close(third)
		}
		return nil
	}
	p, err := resilience.NewPeriodic(
		10*time.Millisecond, // pause between calls
		5*time.Millisecond,  // plus up to this much jitter
		time.Second,         // each call's timeout
		refresh,
		resilience.WithErrorHandler(func(err error) { fmt.Println("refresh failed:", err) }),
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := p.Start(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	<-third
	p.Stop() // waits for the loop to exit
	fmt.Println("stopped")
	// Output:
	// refresh failed: upstream unavailable
	// stopped
}

func ExampleCache() {
	c, err := resilience.NewCache[string, string](resilience.CacheConfig{
		MaxEntries: 100,
		TTL:        time.Minute,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	loads := 0
	loadSettings := func(ctx context.Context) (string, error) {
		loads++ // an expensive fetch, made once per minute at most
		return "feature-x=on", nil
	}
	for range 3 {
		v, err := c.Get(context.Background(), "settings", loadSettings)
		fmt.Println(v, err)
	}
	fmt.Println("loads:", loads)
	// Output:
	// feature-x=on <nil>
	// feature-x=on <nil>
	// feature-x=on <nil>
	// loads: 1
}

// staticResolver stands in for DNS in the DNSCache example.
type staticResolver map[string][]string

func (r staticResolver) LookupHost(_ context.Context, host string) ([]string, error) {
	fmt.Println("resolving", host)
	if addrs, ok := r[host]; ok {
		return addrs, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func ExampleDNSCache() {
	dns, err := resilience.NewDNSCache(resilience.DNSCacheConfig{
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

	// Every connection the transport opens now resolves through the cache.
	client := &http.Client{Transport: &http.Transport{DialContext: dns.DialContext}} //nolint:govet // unusedwrite: shows the wiring only; the example sends no request
	_ = client
	// Output:
	// resolving api.example.com
	// api.example.com [192.0.2.10 192.0.2.11] <nil>
	// API.Example.com. [192.0.2.10 192.0.2.11] <nil>
	// 192.0.2.99 [192.0.2.99] <nil>
	// resolving nowhere.example.com
	// not found: true
}
