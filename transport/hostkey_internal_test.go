package transport

import (
	"net/url"
	"testing"
)

func TestHostKeyNormalisesSpellingsOfOneServer(t *testing.T) {
	cases := []struct {
		url, want string
	}{
		{"http://example.test/", "example.test"},
		{"http://EXAMPLE.test/", "example.test"},
		{"http://example.test:80/", "example.test"},
		{"HTTP://Example.Test:80/", "example.test"},
		{"http://example.test:/", "example.test"},
		{"https://example.test/", "example.test"},
		{"https://example.test:443/", "example.test"},
		{"http://example.test:443/", "example.test:443"},
		{"https://example.test:80/", "example.test:80"},
		{"http://example.test:8080/", "example.test:8080"},
		{"http://EXAMPLE.test:8080/", "example.test:8080"},
		{"http://127.0.0.1/", "127.0.0.1"},
		{"http://127.0.0.1:80/", "127.0.0.1"},
		{"http://127.0.0.1:8080/", "127.0.0.1:8080"},
		{"http://[::1]/", "[::1]"},
		{"http://[::1]:80/", "[::1]"},
		{"http://[0:0::1]:80/", "[::1]"},
		{"http://[::1]:8080/", "[::1]:8080"},
		{"https://[2001:DB8::1]:443/", "[2001:db8::1]"},
		{"http://[fe80::1%25eth0]:80/", "[fe80::1%eth0]"},
		{"/relative", ""},
	}
	for _, c := range cases {
		t.Run(c.url, func(t *testing.T) {
			u, err := url.Parse(c.url)
			if err != nil {
				t.Fatal(err)
			}
			if got := hostKey(u); got != c.want {
				t.Fatalf("hostKey(%q) = %q, want %q", c.url, got, c.want)
			}
		})
	}
}

// A hand-built URL (not from url.Parse) may carry an upper-case scheme.
func TestHostKeyHandBuiltURL(t *testing.T) {
	u := &url.URL{Scheme: "HTTPS", Host: "Example.TEST:443"}
	if got := hostKey(u); got != "example.test" {
		t.Fatalf("hostKey = %q, want example.test", got)
	}
}

func TestHostKeyCommonCaseDoesNotAllocate(t *testing.T) {
	for _, raw := range []string{"http://example.test/", "http://example.test:80/", "http://example.test:8080/"} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if n := testing.AllocsPerRun(100, func() { _ = hostKey(u) }); n != 0 {
			t.Errorf("hostKey(%q) allocates %v times", raw, n)
		}
	}
}
