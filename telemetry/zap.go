package telemetry

import (
	"context"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// zapSink writes log lines to a *zap.Logger. Fields are built only after
// the level check passes; each line costs one []zap.Field.
type zapSink struct{ l *zap.Logger }

func zapLevel(l level) zapcore.Level {
	switch l {
	case levelDebug:
		return zapcore.DebugLevel
	case levelInfo:
		return zapcore.InfoLevel
	case levelWarn:
		return zapcore.WarnLevel
	}
	return zapcore.ErrorLevel
}

func (s zapSink) enabled(_ context.Context, l level) bool { return s.l.Core().Enabled(zapLevel(l)) }

func (s zapSink) write(_ context.Context, l level, msg string, fs []field) {
	ce := s.l.Check(zapLevel(l), msg) // also applies the core's sampling
	if ce == nil {
		return
	}
	zf := make([]zap.Field, len(fs))
	for i, f := range fs {
		switch f.kind {
		case kindInt:
			zf[i] = zap.Int64(f.key, f.n)
		case kindFloat:
			zf[i] = zap.Float64(f.key, f.f)
		case kindBool:
			zf[i] = zap.Bool(f.key, f.n != 0)
		default:
			zf[i] = zap.String(f.key, f.s)
		}
	}
	ce.Write(zf...)
}
