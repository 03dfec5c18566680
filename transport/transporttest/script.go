package transporttest

import "net/http"

// A Script chooses the Step for each request: Step(n, req) for the nth
// request it is asked about (1 for the first) on its count (see the package
// doc for which requests share a count). req is the request as the
// RoundTripper received it, except that its body, already read, can be
// read again from the start; a script must not modify it. Step may be
// called concurrently, for requests in flight together.
type Script interface {
	Step(n int, req *http.Request) Step
}

// Func is a Script written as a function of n and the request.
type Func func(n int, req *http.Request) Step

// Step returns f(n, req).
func (f Func) Step(n int, req *http.Request) Step { return f(n, req) }

// Sequence is a Script of steps taken in order. Build one with Steps.
type Sequence struct {
	steps []Step
	then  Step
	final bool // then replaces the last step past the end
}

// Steps returns a Script that answers the nth request with steps[n-1] and
// every request past the end with the last step, repeated, unless Then
// says otherwise. With no steps (and no Then) every request gets the zero
// Step, 200 OK.
func Steps(steps ...Step) Sequence {
	return Sequence{steps: append([]Step(nil), steps...)}
}

// Then returns a copy of s whose requests past the end get step instead of
// the last step repeated.
func (s Sequence) Then(step Step) Sequence {
	s.then, s.final = step, true
	return s
}

// Step returns the step for the nth request.
func (s Sequence) Step(n int, _ *http.Request) Step {
	switch {
	case n >= 1 && n <= len(s.steps):
		return s.steps[n-1]
	case s.final || len(s.steps) == 0:
		return s.then
	}
	return s.steps[len(s.steps)-1]
}
