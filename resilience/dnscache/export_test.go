package dnscache

import (
	"context"
	"net"
)

// ConfigWithDial returns cfg with Dialer.DialContext replaced by dial.
func ConfigWithDial(cfg Config, dial func(ctx context.Context, network, address string) (net.Conn, error)) Config {
	cfg.dial = dial
	return cfg
}
