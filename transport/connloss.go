package transport

import (
	"errors"
	"reflect"
)

// stdlibConnLoss lists, word for word, the errors by which net/http's
// bundled HTTP/2 client reports that a connection was lost or closed under
// a request: they are made with errors.New, unexported and untyped, so
// nothing but their text tells them apart. The list is taken from Go's
// source (net/http/h2_bundle.go in Go 1.26, net/http/internal/http2's
// transport.go in Go 1.27), where each is a single errors.New value:
//
//   - "http2: client connection lost": the health check's PING
//     (http.HTTP2Config's SendPingTimeout, then PingTimeout) went
//     unanswered, and the client closed the connection;
//   - "http2: client conn is closed": the request met a connection
//     already closed before its headers were written;
//   - "http2: client conn not usable": the connection could not take the
//     request (net/http retries this one itself, on a new connection; it
//     surfaces only when that is not possible).
//
// Each means what an EOF or a reset means over HTTP/1.1: the connection
// went away, not that the server answered. The one the client's own
// ClientConn.Close makes ("force closed") is left out: that is the
// caller's decision. So is the GOAWAY that excludes a request ("http2:
// Transport received Server's graceful shutdown GOAWAY"): it is a refusal,
// not a loss (see stdlibGotGoAway in h2reset.go). Here and in h2reset.go
// are the only places gotry reads an error's text; they match whole
// messages of the errors.New type only, never a pattern, and never an
// error that wraps one under a message of its own.
var stdlibConnLoss = [...]string{
	"http2: client connection lost",
	"http2: client conn is closed",
	"http2: client conn not usable",
}

// errorString is the type of errors.New's errors: an entry of
// stdlibConnLoss matches only an error of that type.
var errorString = reflect.TypeOf(errors.New(""))

// isStdlibConnLoss reports whether err's chain holds one of net/http's
// untyped connection-loss errors (see stdlibConnLoss).
func isStdlibConnLoss(err error) bool { return stdlibMessage(err, stdlibConnLoss[:]) }

// stdlibMessage reports whether err's chain holds an errors.New error whose
// whole text is one of msgs.
func stdlibMessage(err error, msgs []string) bool {
	return inChain(err, func(e error) bool {
		if reflect.TypeOf(e) != errorString {
			return false
		}
		msg := e.Error()
		for _, m := range msgs {
			if msg == m {
				return true
			}
		}
		return false
	})
}

// inChain reports whether match holds for an error of err's chain, which it
// walks as errors.Is does, one link at a time (match sees each link, not
// what it wraps).
func inChain(err error, match func(error) bool) bool {
	for err != nil {
		if match(err) {
			return true
		}
		switch u := err.(type) { //nolint:errorlint // this walks the chain itself, one link at a time
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if inChain(e, match) {
					return true
				}
			}
			return false
		default:
			return false
		}
	}
	return false
}
