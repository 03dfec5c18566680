package transport

// CloseIdleConnections closes the base transport's idle connections when the
// base has a CloseIdleConnections method (*http.Transport does), so that
// http.Client.CloseIdleConnections works through a Transport. Connections in
// use are left alone. With any other base it does nothing.
func (t *Transport) CloseIdleConnections() {
	type closeIdler interface{ CloseIdleConnections() }
	if b, ok := t.base.(closeIdler); ok {
		b.CloseIdleConnections()
	}
}
