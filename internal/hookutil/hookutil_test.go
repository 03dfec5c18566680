package hookutil

import (
	"context"
	"slices"
	"testing"
)

func TestBothCallsInOrderAndKeepsNil(t *testing.T) {
	var got []string
	f := func(s string) { got = append(got, "f"+s) }
	g := func(s string) { got = append(got, "g"+s) }
	Both(f, g)("1")
	Both3(func(a, b, c int) { got = append(got, "3f") }, func(a, b, c int) { got = append(got, "3g") })(1, 2, 3)
	if !slices.Equal(got, []string{"f1", "g1", "3f", "3g"}) {
		t.Fatalf("got %q", got)
	}
	if Both[string](nil, nil) != nil || Chain[int](nil, nil) != nil || Both3[int, int, int](nil, nil) != nil {
		t.Fatal("combining two nil hooks must stay nil (free)")
	}
}

func TestChainPassesContextAlong(t *testing.T) {
	type k struct{}
	f := func(ctx context.Context, _ int) context.Context { return context.WithValue(ctx, k{}, "f") }
	var saw any
	g := func(ctx context.Context, _ int) context.Context { saw = ctx.Value(k{}); return ctx }
	Chain(f, g)(context.Background(), 0)
	if saw != "f" {
		t.Fatalf("g saw %v", saw)
	}
}
