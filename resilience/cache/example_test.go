package cache_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/MrVSiK/gotry/resilience/cache"
)

func ExampleCache() {
	c, err := cache.New[string, string](cache.Config{
		MaxEntries: 100,
		TTL:        time.Minute,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	loads := 0
	loadSettings := func(ctx context.Context) (string, error) {
		loads++ // an expensive fetch, made once per minute at most
		return "feature-x=on", nil
	}
	for range 3 {
		v, err := c.Get(context.Background(), "settings", loadSettings)
		fmt.Println(v, err)
	}
	fmt.Println("loads:", loads)
	// Output:
	// feature-x=on <nil>
	// feature-x=on <nil>
	// feature-x=on <nil>
	// loads: 1
}

// Errors are not cached: the next Get loads again.
func ExampleCache_Get_errorsAreNotCached() {
	c, err := cache.New[string, int](cache.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	attempts := 0
	load := func(context.Context) (int, error) {
		attempts++
		if attempts == 1 {
			return 0, errors.New("backend down")
		}
		return 42, nil
	}
	for range 3 {
		fmt.Println(c.Get(context.Background(), "answer", load))
	}
	fmt.Println("attempts:", attempts)
	// Output:
	// 0 backend down
	// 42 <nil>
	// 42 <nil>
	// attempts: 2
}

// Peek checks the cache without loading. A load closure that captures
// variables is allocated on every call of Get, hit or miss, so checking Peek
// first keeps hits free of allocations.
func ExampleCache_Peek() {
	c, err := cache.New[int, string](cache.Config{TTL: time.Minute})
	if err != nil {
		fmt.Println(err)
		return
	}
	user := func(ctx context.Context, id int) (string, error) {
		if name, ok := c.Peek(id); ok {
			return name, nil
		}
		return c.Get(ctx, id, func(context.Context) (string, error) {
			return fmt.Sprintf("user-%d", id), nil // a lookup that needs id
		})
	}
	fmt.Println(user(context.Background(), 7))
	_, ok := c.Peek(7)
	fmt.Println("cached:", ok)
	// Output:
	// user-7 <nil>
	// cached: true
}
