package resilience

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// inBothContextModes runs f with the engine's own attempt contexts and with
// the standard library's fallback (stdContexts), which a Go release whose
// context.Cause the engine cannot answer would select.
func inBothContextModes(t *testing.T, f func(t *testing.T)) {
	t.Run("attemptCtx", f)
	t.Run("std", func(t *testing.T) {
		old := stdContexts
		stdContexts = true
		defer func() { stdContexts = old }()
		f(t)
	})
}

// TestAttemptContextsReportTheirCause: on the toolchain CI uses, the engine
// answers context.Cause itself; if a Go upgrade breaks that, this fails
// (and the engine would fall back to context.WithCancelCause).
func TestAttemptContextsReportTheirCause(t *testing.T) {
	if stdContexts {
		t.Fatal("learnCauseKey fell back to context.WithCancelCause on this Go release")
	}
}

func mustBeDone(t *testing.T, ctx context.Context) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("context not cancelled")
	}
}

func TestAttemptContextCancel(t *testing.T) {
	inBothContextModes(t, func(t *testing.T) {
		for _, cause := range []error{ErrAttemptLost, ErrAttemptTimeout, nil, errors.New("other")} {
			ctx, own := newOwnCtx(context.Background())
			if !own.set() {
				t.Fatal("own context not set")
			}
			if ctx.Err() != nil || context.Cause(ctx) != nil {
				t.Fatal("live context reports an error")
			}
			early := ctx.Done() // waited on before the cancellation...
			own.cancel(cause)
			own.cancel(errors.New("second")) // later calls do nothing
			<-early
			<-ctx.Done() // ...and after
			want := cause
			if want == nil {
				want = context.Canceled
			}
			if ctx.Err() != context.Canceled || context.Cause(ctx) != want {
				t.Fatalf("cancelled with %v: Err %v, Cause %v", cause, ctx.Err(), context.Cause(ctx))
			}
		}
		var none ownCtx
		none.cancel(ErrAttemptLost) // a shared context: nothing to do
		if none.set() {
			t.Fatal("zero ownCtx is set")
		}
	})
}

// TestAttemptContextChildren: what http.Transport does with an attempt's
// context (context.WithCancelCause on it) and what context.AfterFunc does
// both follow its cancellation, with its cause, and can be let go first.
func TestAttemptContextChildren(t *testing.T) {
	inBothContextModes(t, func(t *testing.T) {
		ctx, own := newOwnCtx(context.Background())
		child, stopChild := context.WithCancelCause(ctx)
		released, releaseFirst := context.WithCancel(ctx)
		releaseFirst() // a child cancelled first unregisters itself
		ran := make(chan struct{})
		context.AfterFunc(ctx, func() { close(ran) })
		stop := context.AfterFunc(ctx, func() { t.Error("stopped AfterFunc ran") })
		if !stop() {
			t.Fatal("stop before the cancellation reported false")
		}
		own.cancel(ErrAttemptLost)
		mustBeDone(t, child)
		<-ran
		if got := context.Cause(child); got != ErrAttemptLost {
			t.Fatalf("child's cause %v", got)
		}
		if released.Err() != context.Canceled || context.Cause(released) != context.Canceled {
			t.Fatalf("released child: %v, %v", released.Err(), context.Cause(released))
		}
		stopChild(nil)
		late := make(chan struct{}) // registered after the cancellation: runs at once
		context.AfterFunc(ctx, func() { close(late) })
		<-late
		if stop() {
			t.Fatal("second stop reported true")
		}
	})
}

// TestAttemptContextFollowsItsParent: the call's context ending ends the
// attempt's, with the parent's error and cause, whether something waits on
// it (linked) or only asks Err afterwards; values and the deadline are the
// parent's.
func TestAttemptContextFollowsItsParent(t *testing.T) {
	inBothContextModes(t, func(t *testing.T) {
		type key struct{}
		stop := errors.New("caller stopped")
		deadline := time.Now().Add(time.Hour)
		base, cancelBase := context.WithDeadline(context.WithValue(context.Background(), key{}, "v"), deadline)
		defer cancelBase()
		parent, cancel := context.WithCancelCause(base)
		waited, _ := newOwnCtx(parent)
		asked, _ := newOwnCtx(parent)
		child, stopChild := context.WithCancel(waited)
		defer stopChild()
		if waited.Value(key{}) != "v" {
			t.Fatal("value not inherited")
		}
		if d, ok := waited.Deadline(); !ok || !d.Equal(deadline) {
			t.Fatalf("deadline %v %v", d, ok)
		}
		cancel(stop)
		mustBeDone(t, waited)
		mustBeDone(t, child)
		for _, ctx := range []context.Context{waited, asked, child} {
			if ctx.Err() != context.Canceled || context.Cause(ctx) != stop {
				t.Fatalf("%v: Err %v, Cause %v", ctx, ctx.Err(), context.Cause(ctx))
			}
		}
		mustBeDone(t, asked)
	})
}

// TestAttemptContextAfterItsParentEnded: an attempt context made under a
// parent already ended reports it at once.
func TestAttemptContextAfterItsParentEnded(t *testing.T) {
	inBothContextModes(t, func(t *testing.T) {
		parent, cancel := context.WithCancel(context.Background())
		cancel()
		ctx, _ := newOwnCtx(parent)
		mustBeDone(t, ctx)
		if ctx.Err() != context.Canceled {
			t.Fatalf("Err %v", ctx.Err())
		}
	})
}

// TestAttemptContextConcurrentUse, under -race: cancellations, waits,
// children and AfterFuncs from several goroutines at once.
func TestAttemptContextConcurrentUse(t *testing.T) {
	for i := 0; i < 200; i++ {
		parent, cancelParent := context.WithCancel(context.Background())
		ctx, own := newOwnCtx(parent)
		var wg sync.WaitGroup
		wg.Add(5)
		go func() { defer wg.Done(); own.cancel(ErrAttemptLost) }()
		go func() { defer wg.Done(); cancelParent() }()
		go func() { defer wg.Done(); <-ctx.Done() }()
		go func() {
			defer wg.Done()
			child, stop := context.WithCancel(ctx)
			<-child.Done()
			stop()
		}()
		go func() {
			defer wg.Done()
			ran := make(chan struct{})
			if stop := context.AfterFunc(ctx, func() { close(ran) }); !stop() {
				<-ran
			}
			_ = context.Cause(ctx)
		}()
		wg.Wait()
		if c := context.Cause(ctx); c != ErrAttemptLost && c != context.Canceled {
			t.Fatalf("cause %v", c)
		}
	}
}
