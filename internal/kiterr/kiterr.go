// Package kiterr holds the error types the kit packages under resilience/
// share (schedule, periodic, cache, dnscache). Each of those packages
// re-exports the types it returns under its own name (periodic.ConfigError,
// cache.PanicError, ...) as aliases, so callers match them with errors.As
// without importing anything internal, and one implementation serves all.
package kiterr

import (
	"fmt"
	"runtime/debug"
	"strings"
)

// ConfigError reports an invalid configuration value given to a kit
// constructor.
type ConfigError struct {
	// Config is the package-qualified name of what was being configured: a
	// config struct ("schedule.Config") or a constructor taking plain
	// arguments ("periodic.New").
	Config string
	// Option names the field or argument, e.g. "Factor".
	Option string
	// Reason says what is wrong with it, including the value given.
	Reason string
}

// Error returns "pkg: Name: Option reason", e.g. "schedule: Config: Factor
// must be ...", so the message starts with the package name.
func (e *ConfigError) Error() string {
	pkg, name, ok := strings.Cut(e.Config, ".")
	if !ok {
		return e.Config + ": " + e.Option + " " + e.Reason
	}
	return pkg + ": " + name + ": " + e.Option + " " + e.Reason
}

// Configf builds a *ConfigError with a formatted reason.
func Configf(config, option, format string, args ...any) *ConfigError {
	return &ConfigError{Config: config, Option: option, Reason: fmt.Sprintf(format, args...)}
}

// PanicError is the error that replaces a panic recovered from user-supplied
// work.
type PanicError struct {
	// Value is the value passed to panic.
	Value any
	// Stack is the panicking goroutine's stack trace at the point of
	// recovery.
	Stack []byte

	kind error // the sentinel of the package that recovered the panic
}

// NewPanicError captures the current stack; call it from the deferred
// function that recovered v. kind is the recovering package's sentinel
// (e.g. periodic.ErrPanic): errors.Is matches it, and the message starts
// with its text.
func NewPanicError(kind error, v any) *PanicError {
	return &PanicError{Value: v, Stack: debug.Stack(), kind: kind}
}

// Error returns the sentinel's text and the panic value, followed by the
// stack trace.
func (e *PanicError) Error() string {
	kind := "panic"
	if e.kind != nil {
		kind = e.kind.Error()
	}
	return fmt.Sprintf("%s: %v\n\n%s", kind, e.Value, e.Stack)
}

// Is reports whether target is the sentinel the error was made with.
func (e *PanicError) Is(target error) bool { return e.kind != nil && target == e.kind }

// Unwrap returns the panic value when it is an error, so errors.Is and
// errors.As see through the panic; otherwise nil.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}
