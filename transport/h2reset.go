package transport

import (
	"errors"
	"reflect"
)

// HTTP/2 stream resets (issue #30). Over HTTP/2 a server that fails one
// request resets its stream (RST_STREAM) where an HTTP/1.1 server closes
// the connection; Go's server does so, with INTERNAL_ERROR, when a handler
// panics (http.ErrAbortHandler included). net/http's HTTP/2 client reports
// a reset it received as a StreamError whose Cause is its errFromPeer. RFC
// 9113 §8.7 makes two failures safe to retry whatever the method, because
// the server did not process the request: a reset with REFUSED_STREAM, and
// a stream above the last stream id of the server's GOAWAY, which the
// client fails with its errClientConnGotGoAway.
//
// None of the client's types is exported. The StreamError of Go 1.27
// (net/http/internal/http2, errors.go) has an As method that converts it
// into any struct with its fields' names and types, which is how
// golang.org/x/net/http2.StreamError is matched: h2StreamError is such a
// struct, and errors.As finds it. Go 1.26's bundled copy
// (net/http/h2_bundle.go, type http2StreamError) has no As method; it,
// x/net's StreamError, and GoAwayError in every version (which has none)
// are recognised by their type's package path and name, and read by their
// fields' names (the h2Types below), never by their text. The two
// untyped errors.New values, errFromPeer and errClientConnGotGoAway, are
// matched as connloss.go matches its messages: whole text, errors.New type
// only. Tests pin each against a real HTTP/2 exchange, so a Go release that
// renames any of them fails them.

// h2StreamError has the shape of net/http's HTTP/2 StreamError: the
// target its As method converts into.
type h2StreamError struct {
	StreamID uint32
	Code     h2ErrCode
	Cause    error
}

func (e h2StreamError) Error() string { return "http2 stream error" } // never shown: only a target

// h2ErrCode is an HTTP/2 error code (RFC 9113 §7).
type h2ErrCode uint32

// The codes the classes tell apart.
const (
	h2RefusedStream  h2ErrCode = 0x7 // REFUSED_STREAM: the stream was not processed
	h2HTTP11Required h2ErrCode = 0xd // HTTP_1_1_REQUIRED: retrying over HTTP/2 meets the same demand
)

// h2Type names an HTTP/2 error type by its package path and name.
type h2Type struct{ pkg, name string }

// h2StreamErrorTypes are the StreamError types As cannot reach: Go 1.26's
// bundle (h2_bundle.go: "type http2StreamError struct { StreamID uint32;
// Code http2ErrCode; Cause error }") and x/net's exported one, for a base
// built on golang.org/x/net/http2.
var h2StreamErrorTypes = [...]h2Type{
	{"net/http", "http2StreamError"},
	{"golang.org/x/net/http2", "StreamError"},
}

// h2GoAwayErrorTypes are the client's error for a connection the server
// closed after a GOAWAY that covered the request's stream ("server sent
// GOAWAY and closed the connection"), with fields LastStreamID, ErrCode
// and DebugData: Go 1.26's h2_bundle.go http2GoAwayError, Go 1.27's
// internal/http2 transport.go GoAwayError, and x/net's.
var h2GoAwayErrorTypes = [...]h2Type{
	{"net/http", "http2GoAwayError"},
	{"net/http/internal/http2", "GoAwayError"},
	{"golang.org/x/net/http2", "GoAwayError"},
}

// stdlibFromPeer is the text of the client's errFromPeer, the Cause of a
// StreamError that the server sent (Go 1.26 h2_bundle.go:1404 and :10261,
// Go 1.27 internal/http2 errors.go:81 and transport.go:2849); a StreamError
// the client made itself (a response it found malformed) has another.
const stdlibFromPeer = "received from peer"

// stdlibGotGoAway is the text of errClientConnGotGoAway, with which the
// client fails a stream above a GOAWAY's last stream id (Go 1.26
// h2_bundle.go:7961 and :8228, Go 1.27 internal/http2 transport.go:497 and
// :2717). The stream 1 of a connection whose GOAWAY carries an error code
// gets another error (a fmt.Errorf), which the client does not retry
// either: a server refusing a new connection's first request will likely
// refuse the next.
var stdlibGotGoAway = [...]string{"http2: Transport received Server's graceful shutdown GOAWAY"}

// classifyH2 returns the class of an HTTP/2 stream failure in err's chain,
// or ClassNone when there is none.
func classifyH2(err error) ErrorClass {
	if code, fromPeer, ok := h2Reset(err); ok {
		switch {
		case !fromPeer, code == h2HTTP11Required:
			return ClassNone
		case code == h2RefusedStream:
			return ClassStreamRefused
		}
		return ClassStreamReset
	}
	if stdlibMessage(err, stdlibGotGoAway[:]) {
		return ClassStreamRefused
	}
	if inChain(err, func(e error) bool { return isH2Type(e, h2GoAwayErrorTypes[:]) }) {
		return ClassConnectionClosed
	}
	return ClassNone
}

// h2Reset finds an HTTP/2 StreamError in err's chain and returns its code,
// and whether the server sent it.
func h2Reset(err error) (code h2ErrCode, fromPeer bool, ok bool) {
	var se h2StreamError
	if errors.As(err, &se) {
		return se.Code, isFromPeer(se.Cause), true
	}
	inChain(err, func(e error) bool {
		if !isH2Type(e, h2StreamErrorTypes[:]) {
			return false
		}
		v := reflect.ValueOf(e)
		c, cause := v.FieldByName("Code"), v.FieldByName("Cause")
		if c.Kind() != reflect.Uint32 || cause.Kind() != reflect.Interface || !cause.CanInterface() {
			return false
		}
		code, ok = h2ErrCode(c.Uint()), true
		if cerr, isErr := cause.Interface().(error); isErr {
			fromPeer = isFromPeer(cerr)
		}
		return true
	})
	return code, fromPeer, ok
}

// isFromPeer reports whether cause is the client's errFromPeer.
func isFromPeer(cause error) bool {
	return cause != nil && reflect.TypeOf(cause) == errorString && cause.Error() == stdlibFromPeer
}

// isH2Type reports whether err's own type is a struct type of types.
func isH2Type(err error, types []h2Type) bool {
	t := reflect.TypeOf(err)
	if t.Kind() != reflect.Struct {
		return false
	}
	for _, h := range types {
		if t.Name() == h.name && t.PkgPath() == h.pkg {
			return true
		}
	}
	return false
}
