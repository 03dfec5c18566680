// Package hookutil combines optional hook funcs; the core's Combine and
// CombineHooks share it. A nil func means "no hook", so combining with nil
// returns the other func unchanged and costs nothing.
package hookutil

import "context"

// Both returns a func calling f and then g, or whichever is non-nil.
func Both[E any](f, g func(E)) func(E) {
	switch {
	case f == nil:
		return g
	case g == nil:
		return f
	}
	return func(e E) { f(e); g(e) }
}

// Both3 is Both for hooks of three arguments.
func Both3[A, B, C any](f, g func(A, B, C)) func(A, B, C) {
	switch {
	case f == nil:
		return g
	case g == nil:
		return f
	}
	return func(a A, b B, c C) { f(a, b, c); g(a, b, c) }
}

// Chain chains two context-returning hooks: g receives the context f
// returned.
func Chain[E any](f, g func(context.Context, E) context.Context) func(context.Context, E) context.Context {
	switch {
	case f == nil:
		return g
	case g == nil:
		return f
	}
	return func(ctx context.Context, e E) context.Context { return g(f(ctx, e), e) }
}
