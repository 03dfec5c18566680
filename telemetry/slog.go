package telemetry

import (
	"context"
	"log/slog"
)

// slogSink writes the zap adapter's lines, with the same messages and
// fields, to a *slog.Logger. Attributes are built only after Enabled.
type slogSink struct{ l *slog.Logger }

func slogLevel(l level) slog.Level {
	switch l {
	case levelDebug:
		return slog.LevelDebug
	case levelInfo:
		return slog.LevelInfo
	case levelWarn:
		return slog.LevelWarn
	}
	return slog.LevelError
}

func (s slogSink) enabled(ctx context.Context, l level) bool {
	if ctx == nil {
		ctx = context.Background()
	}
	return s.l.Enabled(ctx, slogLevel(l))
}

func (s slogSink) write(ctx context.Context, l level, msg string, fs []field) {
	if ctx == nil {
		ctx = context.Background()
	}
	as := make([]slog.Attr, len(fs))
	for i, f := range fs {
		switch f.kind {
		case kindInt:
			as[i] = slog.Int64(f.key, f.n)
		case kindFloat:
			as[i] = slog.Float64(f.key, f.f)
		case kindBool:
			as[i] = slog.Bool(f.key, f.n != 0)
		default:
			as[i] = slog.String(f.key, f.s)
		}
	}
	s.l.LogAttrs(ctx, slogLevel(l), msg, as...)
}
