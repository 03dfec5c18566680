// Package testwait holds the real-time waits that the module's tests share.
// A wait here is a safety net for a broken implementation (it fails the test
// after Limit), never a means of synchronisation: tests drive time with the
// fake clock (clock.Fake). Only tests import it.
package testwait

import (
	"testing"
	"time"
)

// Limit bounds every real-time wait.
const Limit = 5 * time.Second

// Epoch is a fixed start for fake clocks.
var Epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// Recv receives from ch, or fails the test after Limit.
func Recv[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(Limit):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// None fails the test if ch holds a value right now.
func None[T any](t testing.TB, ch <-chan T, what string) {
	t.Helper()
	select {
	case v := <-ch:
		t.Fatalf("unexpected %s: %v", what, v)
	default:
	}
}
