package clock

import "time"

// SlotOf is the list slot a duration's timers go to, for tests that need two
// durations in one list.
func SlotOf(d time.Duration) uint64 { return slotOf(d) }
