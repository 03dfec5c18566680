// Package demo is the engine behind cmd/gotry-demo: a flaky upstream of a
// few virtual hosts on loopback, a client driving steady traffic through a
// fully instrumented transport.Transport, and a terminal view of what the
// transport does (rates, give-ups, budget, breakers, recent log lines and a
// span waterfall of an interesting request).
//
// Run is the entry point. Every goroutine it starts is stopped and waited
// for before it returns, and every server and provider is shut down (and
// flushed), so it can run inside a test under goleak.
//
// The upstream's virtual hosts ("inventory", "payments", "search") are
// separate listeners on 127.0.0.1 with random ports; the client reaches them
// as http://inventory/ and so on through Upstream.DialContext, so spans,
// metrics and breakers carry the host's name rather than 127.0.0.1.
package demo
