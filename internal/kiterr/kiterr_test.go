package kiterr_test

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/MrVSiK/gotry/internal/kiterr"
)

func TestConfigErrorMessageStartsWithThePackage(t *testing.T) {
	tests := []struct {
		err  *kiterr.ConfigError
		want string
	}{
		{kiterr.Configf("schedule.Config", "Factor", "must be >= 1, got %v", 0.5), "schedule: Config: Factor must be >= 1, got 0.5"},
		{kiterr.Configf("periodic.New", "task", "must not be nil"), "periodic: New: task must not be nil"},
		{&kiterr.ConfigError{Config: "Unqualified", Option: "X", Reason: "is bad"}, "Unqualified: X is bad"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
}

func TestPanicErrorMatchesOnlyItsOwnSentinel(t *testing.T) {
	errA := errors.New("a: task panicked")
	errB := errors.New("b: load panicked")
	err := error(kiterr.NewPanicError(errA, io.EOF))
	if !errors.Is(err, errA) {
		t.Error("errors.Is(err, its sentinel) = false")
	}
	if errors.Is(err, errB) {
		t.Error("errors.Is(err, another package's sentinel) = true")
	}
	if !errors.Is(err, io.EOF) {
		t.Error("errors.Is does not see the panic value")
	}
	if !strings.HasPrefix(err.Error(), "a: task panicked: EOF\n\n") {
		t.Errorf("Error() = %q, want the sentinel, the value and the stack", err.Error())
	}
	var zero kiterr.PanicError
	if zero.Is(nil) || !strings.HasPrefix(zero.Error(), "panic: <nil>") {
		t.Errorf("zero PanicError: Is(nil) = %v, Error() = %q", zero.Is(nil), zero.Error())
	}
}
