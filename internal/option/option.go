// Package option is how one option value configures both a
// resilience.Retrier and a transport.Transport: resilience.Option's one
// method takes a Target, a type users cannot name, so only this module
// makes options, and package transport's own options are
// resilience.Options too. The shared options are written once, in
// package resilience; a test in package transport holds that.
package option

// Target is what an option configures: S is resilience.Settings, H
// resilience.Hooks.
type Target[S, H any] struct {
	// Settings are the settings the Retrier and the Transport share.
	Settings *S
	// AddHooks adds a hook set (WithHooks), in order with the owner's
	// own hook options.
	AddHooks func(H)
	// Own is the owner's own configuration (the Retrier's, or the
	// Transport's); an option that configures only one of them
	// type-asserts it.
	Own any
}
