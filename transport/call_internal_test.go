package transport

import (
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// TestCallClearLeavesOnlyTheTransport: a pooled call holds nothing of its
// request. clear sets field by field (see clear), so a field added to call
// and forgotten there fails here: every field is set, and after clear every
// one but t must be zero.
func TestCallClearLeavesOnlyTheTransport(t *testing.T) {
	tr := New(nil)
	req, _ := http.NewRequest(http.MethodPost, "http://example.test/", strings.NewReader("x"))
	c := &call{t: tr, req: req, cl: func(Attempt) Decision { return Default },
		getBody: req.GetBody, first: io.NopCloser(strings.NewReader("x")), nonIdempotentOK: true,
		policyErr: errors.New("x"), firstIsOriginal: true, bodyFresh: true}
	v := reflect.ValueOf(c).Elem()
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Fatalf("test setup: field %s is not set", v.Type().Field(i).Name)
		}
	}
	c.clear()
	for i := range v.NumField() {
		name := v.Type().Field(i).Name
		if zero := v.Field(i).IsZero(); zero == (name == "t") {
			t.Errorf("after clear, %s zero: %v", name, zero)
		}
	}
}
