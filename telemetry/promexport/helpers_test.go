package promexport

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/MrVSiK/gotry/telemetry"
	"github.com/MrVSiK/gotry/telemetry/internal/traffic"
	"github.com/MrVSiK/gotry/transport"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// exercise drives every metric at least once (traffic.Exercise, the
// traffic package telemetry's own tests check through the SDK's reader),
// each transport wired with tel.Transport and its Name: "retries",
// "hedged", "budgeted", "payments" (the breaker), "nobudget" and
// "adaptive".
func exercise(t *testing.T, tel *telemetry.Telemetry) {
	t.Helper()
	traffic.Exercise(t, func(name string) transport.Option { return tel.Transport(telemetry.Name(name)) })
}

// The test traffic shared with package telemetry's tests.
var (
	newServer  = traffic.NewServer
	status     = traffic.Status
	base       = traffic.Base
	mustGet    = traffic.MustGet
	roundTrip  = traffic.Send
	newHold    = traffic.NewHoldBase
	oneAtATime = traffic.OneAtATime
)
