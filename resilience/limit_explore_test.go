package resilience

import (
	"fmt"
	"testing"
	"time"
)

func TestLimitExplore(t *testing.T) {
	for _, m := range []overloadModel{
		{workers: 2, service: 200 * time.Millisecond, load: 0.7, deadline: 1000 * time.Millisecond, dropAt: 5 * time.Second, dropFor: 10 * time.Second, dropBy: 2, length: 25 * time.Second, seed: 1},
		{workers: 2, service: 200 * time.Millisecond, load: 0.7, deadline: 1000 * time.Millisecond, dropAt: 5 * time.Second, dropFor: 10 * time.Second, dropBy: 4, length: 25 * time.Second, seed: 1},
		{workers: 1, service: 100 * time.Millisecond, load: 0.7, deadline: 1000 * time.Millisecond, dropAt: 5 * time.Second, dropFor: 10 * time.Second, dropBy: 2, length: 25 * time.Second, seed: 1},
	} {
		r := m.run()
		fmt.Printf("w=%d s=%v drop=%v sigma=%v load=%v nolimit=%v\n", m.workers, m.service, m.dropBy, m.sigma, m.load, m.noLimit)
		for i := 0; i < len(r.good)-1; i++ {
			fmt.Printf("%d:%d/%d/%d ", i, r.good[i], r.shed[i], r.limits[i])
		}
		fmt.Println()
	}
}

func TestLimitExplore2(t *testing.T) {
	for _, m := range []overloadModel{
		capacityDrop,
		with(capacityDrop, func(m *overloadModel) { m.dropBy, m.seed = 4, 2 }),
		with(capacityDrop, func(m *overloadModel) {
			m.workers, m.service, m.deadline, m.seed = 4, 20*time.Millisecond, 300*time.Millisecond, 3
		}),
		with(capacityDrop, func(m *overloadModel) {
			m.workers, m.service, m.deadline, m.seed = 8, 10*time.Millisecond, 100*time.Millisecond, 9
		}),
	} {
		r := m.run()
		fmt.Printf("w=%d s=%v drop=%v\n", m.workers, m.service, m.dropBy)
		for i := 0; i < len(r.good)-1; i++ {
			fmt.Printf("%d:%d/%d/%d ", i, r.good[i], r.shed[i], r.limits[i])
		}
		fmt.Println()
	}
}
