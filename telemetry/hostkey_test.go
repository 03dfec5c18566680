package telemetry

import (
	"net/url"
	"testing"
)

// TestBreakerAndRequestHostsAgree: a breaker's key (the transport's
// normalised host) and the request's URL give one server.address, so
// breaker series and request series of one server join: "[::1]" is "::1"
// on both, and a host name is lower case on both.
func TestBreakerAndRequestHostsAgree(t *testing.T) {
	tests := []struct {
		url, key string
		want     string
	}{
		{"http://[::1]:8080/x", "[::1]:8080", "::1"},
		{"http://[::1]/x", "[::1]", "::1"},
		{"http://EXAMPLE.test/x", "example.test", "example.test"},
		{"https://Example.Test:8443/x", "example.test:8443", "example.test"},
		{"http://127.0.0.1:9000/", "127.0.0.1:9000", "127.0.0.1"},
	}
	for _, tc := range tests {
		u, err := url.Parse(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		fromReq, _ := hostPort(u)
		fromKey, _ := splitKey(tc.key)
		if fromReq != tc.want || fromKey != tc.want {
			t.Errorf("%s: request gives %q, breaker key %q gives %q; want %q on both", tc.url, fromReq, tc.key, fromKey, tc.want)
		}
	}
}
