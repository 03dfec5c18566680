// Package demo is the engine behind cmd/gotry-demo: a flaky upstream of a
// few virtual hosts on loopback, a client driving steady traffic through a
// fully instrumented transport.Transport, and a terminal view of what the
// transport does (rates, give-ups, budget, breakers, the concurrency limit,
// recent log lines and a span waterfall of an interesting request).
//
// Run is the entry point. Every goroutine it starts is stopped and waited
// for before it returns, and every server and provider is shut down (and
// flushed), so it can run inside a test under goleak.
//
// The upstream's virtual hosts ("inventory", "payments", "search", and
// "checkout", a service behind transport.Middleware that calls payments:
// see chainService) are separate listeners on 127.0.0.1 with random ports;
// the client reaches them as http://inventory/ and so on through
// Upstream.DialContext, so spans, metrics and breakers carry the host's
// name rather than 127.0.0.1.
//
// Its phases (DefaultConfig): payments goes down (an outage, the breaker's
// case), every host browns out (a burst of 503s, the budget's case), and
// search's capacity drops (Drop: one request at a time from a FIFO queue,
// slower), which the transport's concurrency limit absorbs: it learns how
// much search serves in time and sheds the rest at once, so goodput holds at
// search's capacity and search's breaker stays closed. Run with
// -limit-hosts "" to see the same drop without the limit: the queue grows
// past the per-attempt timeout, every attempt times out, and search's
// breaker opens.
package demo
