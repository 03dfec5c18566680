package clock

import "time"

// SlotOf is the list slot a duration's timers go to, for tests that need two
// durations in one list.
func SlotOf(d time.Duration) uint64 { return slotOf(d) }

// Lists is how many durations have lists of their own.
func (qs *Queues) Lists() int {
	n := 0
	for i := range qs.slots {
		if qs.slots[i].Load() != nil {
			n++
		}
	}
	return n
}
