// Package migrate shows one client built with go-retryablehttp, heimdall
// and failsafe-go, each beside the same client built with gotry, and what
// each does with a request that fails once. MIGRATING.md at the
// repository's root has the option-by-option tables and every default that
// differs.
//
// It is a module of its own so that the three libraries never enter
// gotry's go.mod, and it has no API: its examples are the point, and they
// run as tests (make test runs them).
package migrate
