// Package transporttest is a scripted http.RoundTripper for testing code
// that makes its calls through gotry: put it under a transport.Transport,
// in place of the network, and script what each attempt gets. For the
// network itself, slowed down, it has a throttling proxy ([SlowLink]).
//
//	rt := transporttest.New(transporttest.Steps(
//		transporttest.Status(503),
//		transporttest.Status(200).WithBody("ok"),
//	))
//	client := &http.Client{Transport: transport.New(rt)}
//	// ... the code under test calls through client ...
//	if n := rt.Count(); n != 2 { t.Errorf("attempts: %d, want 2", n) }
//
// # The model
//
// Every request the RoundTripper receives is one attempt of gotry's (a
// first attempt, a retry or a hedge: they are all requests to the base).
// For each, the RoundTripper finds the request's [Script], asks it for a
// [Step] and does what the step says: it waits Latency, then answers with
// a response (Status, Header, Body) or fails with Err. A step may instead
// Hang until the request's context ends, as a server that never answers.
//
// Scripts are counted: a script sees the number n of the request, 1 for
// the first it is asked about, so Steps(a, b, c) answers the first request
// with a, the second with b and every later one with c (or with the step
// given to Then). Which script a request gets, and which count it goes
// on, is decided by:
//
//   - [RoundTripper.Handle]: a pattern in http.ServeMux's syntax
//     ("GET /items/{id}", "POST example.test/pay") routes the requests it
//     matches to a script of their own; the script given to [New] gets the
//     rest (nil: they fail with an error matching [ErrNoScript]);
//   - [WithKey]: a function of the request that splits each script's count
//     further, so that each key (a path, a header the caller sets per
//     logical request) runs the script from its first step: concurrent
//     requests then each see 503, 503, 200 rather than sharing one
//     sequence. Without it, each script has one count.
//
// A script may also be a function ([Func]) of n and the request.
//
// # What it records and closes
//
// The RoundTripper records every request as it arrives, before its step
// runs: [RoundTripper.Requests] returns them in order with their method,
// URL, headers, body, pattern, key, number and what was done with them,
// and [RoundTripper.Count] how many there were, which is how many
// attempts gotry made. It reads each request body to its end and closes
// it, on every path, as the http.RoundTripper contract asks; a script sees
// the bytes it read. Each response it returns has a body of its own
// (never http.NoBody, even when empty), and [RoundTripper.Unclosed] says
// how many of those are not yet closed: gotry closes every body it does
// not return, so once the caller has closed the response it got, a test
// can ask for zero (a hedge's loser may be closed on gotry's goroutine
// just after the caller's RoundTrip has returned: poll for it briefly, or
// run the test in a synctest bubble and call synctest.Wait). A request
// whose context has ended when it arrives is recorded, but, as
// http.Transport would not send it, it asks no script and fails with the
// context's error. Like http.Transport, it reports to an
// httptrace.ClientTrace in the request's context when the request has been
// written (WroteHeaders, WroteRequest: before its step's latency) and when
// the answer's first byte came (GotFirstResponseByte), so gotry's
// per-attempt header timeout runs over it as over the network.
//
// # Time
//
// A step's Latency is waited for on the RoundTripper's clock ([WithClock];
// default the wall clock), and is cut short when the request's context
// ends: RoundTrip then returns the context's error, as http.Transport
// does when a caller gives up or gotry cancels a hedge's loser. So a
// test need not sleep:
//
//   - with the clock package's fake clock given to both gotry
//     (transport.WithClock) and the RoundTripper (WithClock), the test
//     moves the time on with Advance. Each step with a Latency arms one
//     timer on the clock, among gotry's own (backoffs, hedge delays,
//     per-attempt timeouts): count them in WaitForTimers;
//   - inside a testing/synctest bubble, leave both on the wall clock,
//     which the bubble makes virtual: time moves when every goroutine of
//     the bubble is blocked, at once and exactly. Make the RoundTripper
//     and the Transport inside the bubble, and use them only there.
//
// A RoundTripper is safe for concurrent use; Handle may be called while
// requests are in flight. Its zero value is not usable: call New.
//
// # A slow link
//
// Code that uploads or downloads large bodies needs the network itself,
// slower than loopback, rather than a script: [SlowLink] is a TCP proxy
// on loopback that carries each direction at a set rate, paced on the
// socket, so that the kernel's buffers fill as a real link's queues do
// and a request's write ends seconds before its server has the body. Put
// it between an http.Transport (under gotry, or any client) and an
// httptest.Server:
//
//	srv := httptest.NewServer(handler)
//	defer srv.Close()
//	link := transporttest.StartSlowLink(t, srv.Listener.Addr().String(), 2000<<10, 0) // 2,000 KB/s up
//	resp, err := client.Post(link.URL()+"/upload", "application/octet-stream", body)
//
// The package imports only the standard library and gotry's clock, never
// the transport itself: it only answers as a network would.
package transporttest
