// Package fakeclock names the public fake clock for the module's own
// tests: Clock is github.com/MrVSiK/gotry/clock's Fake.
package fakeclock

import (
	"time"

	"github.com/MrVSiK/gotry/clock"
)

// Clock is the public clock.Fake.
type Clock = clock.Fake

// New returns a fake clock reading start (clock.NewFake).
func New(start time.Time) *Clock { return clock.NewFake(start) }
