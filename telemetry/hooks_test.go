package telemetry

import (
	"fmt"
	"strings"
	"testing"

	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
)

// TestNameGivenTwice: one transport or retrier wired twice by one
// Telemetry with two different names fails at construction, naming the
// option and both names; with the same name (or none both times) it is
// wired once, by the first, as before.
func TestNameGivenTwice(t *testing.T) {
	tel := New()
	build := map[string]func(first, second HooksOption){
		"Transport": func(first, second HooksOption) { transport.New(nil, tel.Transport(first), tel.Transport(second)) },
		"Retrier":   func(first, second HooksOption) { resilience.NewRetrier(tel.Retrier(first), tel.Retrier(second)) },
	}
	tests := []struct {
		first, second HooksOption
		panics        string // the names the message quotes; "" for no panic
	}{
		{Name("first"), Name("second"), `"first" and then "second"`},
		{Name("first"), nil, `"first" and then ""`},
		{nil, Name("second"), `"" and then "second"`},
		{Name("same"), Name("same"), ""},
		{nil, nil, ""},
	}
	for what, wire := range build {
		for _, tc := range tests {
			t.Run(fmt.Sprintf("%s %v", what, tc.panics), func(t *testing.T) {
				got := func() (msg string) {
					defer func() {
						if p := recover(); p != nil {
							msg = fmt.Sprint(p)
						}
					}()
					wire(tc.first, tc.second)
					return ""
				}()
				switch {
				case tc.panics == "" && got != "":
					t.Fatalf("panicked: %s", got)
				case tc.panics != "" && !strings.Contains(got, tc.panics):
					t.Fatalf("panic %q, want one quoting %s", got, tc.panics)
				case tc.panics != "" && !strings.HasPrefix(got, "telemetry: Name: Telemetry."+what):
					t.Fatalf("panic %q does not name the option", got)
				}
			})
		}
	}
}

// The same name twice wires the transport once: its metrics carry the
// name, and nothing is counted twice.
func TestSameNameTwiceWiresOnce(t *testing.T) {
	r := newRig(t)
	srv := newServer(t, status(200))
	tr := transport.New(base(t), r.tel.Transport(Name("a")), r.tel.Transport(Name("a")))
	resp, err := get(t, tr, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	drain(t, resp)
	_, p := find(t, r.collect(t), MetricRequestDuration)
	if len(p) != 1 || p[0].count != 1 {
		t.Fatalf("%s points %+v, want one request counted once", MetricRequestDuration, p)
	}
	if v, _ := p[0].attrs.Value(KeyTransport); v.AsString() != "a" {
		t.Errorf("%s = %q, want a", KeyTransport, v.AsString())
	}
}
