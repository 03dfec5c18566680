package awssdk_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/MrVSiK/gotry/contrib/awssdk"
	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
)

// keyCounter counts gotry's physical attempts per request path (one object
// each, here).
type keyCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *keyCounter) hooks() transport.Option {
	return transport.WithHooks(transport.Hooks{OnAttemptEnd: func(e resilience.AttemptEndEvent) {
		path := transport.RequestOf(e.Event).URL.Path
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.n == nil {
			c.n = map[string]int{}
		}
		c.n[path]++
	}})
}

func (c *keyCounter) get(path string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[path]
}

// throttleFor answers every request 503 SlowDown for d from the first
// arrival on, then passes everything.
func throttleFor(d time.Duration) faultPlan {
	var once sync.Once
	var start time.Time
	return func(string, int) fault {
		once.Do(func() { start = time.Now() })
		if time.Since(start) < d {
			return slowDown
		}
		return pass
	}
}

// A brief throttle is not an outage (issue #37): eight writers meet 600 ms
// of 503 SlowDown on every request, under the recommended set-up (the
// SDK's retryer over gotry at one attempt, with its breaker and limit,
// and the SDK's own backoff). Every write succeeds and reads back byte for
// byte; before, the SlowDowns opened gotry's breaker for 30 s and the
// SDK, told its refusals are final, failed all eight with circuit_open.
func TestS3ThrottleBurstKeepsEveryWrite(t *testing.T) {
	const writers, burst = 8, 600 * time.Millisecond
	srv := newFaultyS3(t, false)
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	var seen keyCounter
	tr := awssdk.S3Transport(base, seen.hooks())
	client := newS3(srv, tr, awssdk.S3Retryer())

	bodies := make([][]byte, writers)
	for i := range bodies {
		bodies[i] = randomBytes(t, 256<<10)
	}
	srv.setPlan(throttleFor(burst))
	took := make([]time.Duration, writers)
	errs := make([]error, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			start := time.Now()
			_, errs[i] = client.PutObject(ctx, &s3.PutObjectInput{
				Bucket: aws.String(bucket), Key: aws.String(fmt.Sprintf("w%d", i)), Body: bytes.NewReader(bodies[i]),
			})
			took[i] = time.Since(start)
		})
	}
	wg.Wait()
	arrivals, effects := srv.counts()

	var attempts []int
	for i := range writers {
		attempts = append(attempts, seen.get(fmt.Sprintf("/%s/w%d", bucket, i)))
	}
	sorted := append([]time.Duration(nil), took...)
	sort.Slice(sorted, func(a, b int) bool { return sorted[a] < sorted[b] })
	t.Logf("%d writers, %v of SlowDown: attempts per write %v; time per write min %v, median %v, max %v; arrivals %s, effects %s",
		writers, burst, attempts, sorted[0].Round(time.Millisecond), sorted[writers/2].Round(time.Millisecond),
		sorted[writers-1].Round(time.Millisecond), sortedOps(arrivals), sortedOps(effects))
	for i, err := range errs {
		if err != nil {
			t.Errorf("write %d: %v", i, err)
		}
	}
	h, _ := tr.Stats().Host(srv.Listener.Addr().String())
	t.Logf("after the burst: breaker %v, concurrency limit %d, %d attempts shed", h.Breaker, h.Limit, h.Shed)
	if h.Breaker != resilience.BreakerClosed {
		t.Errorf("breaker %v after a throttle, want closed", h.Breaker)
	}
	for i := range writers {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		out, err := client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(fmt.Sprintf("w%d", i))})
		if err != nil {
			cancel()
			t.Errorf("read back w%d: %v", i, err)
			continue
		}
		got, err := io.ReadAll(out.Body)
		out.Body.Close()
		cancel()
		if err != nil || !bytes.Equal(got, bodies[i]) {
			t.Errorf("read back w%d: %d bytes (err %v), not the %d written", i, len(got), err, len(bodies[i]))
		}
	}
}

// The protection kept: in an outage (every answer a 500 InternalError, or
// every connection refused) the recommended set-up's breaker still opens
// after DefaultFailureThreshold failures, and from then on operations fail
// at once without a request. Four workers run ten PutObjects each.
func TestS3OutageStillOpensTheBreaker(t *testing.T) {
	const workers, perWorker = 4, 10
	cases := []struct {
		name string
		// endpoint returns the URL the client talks to and a func that
		// counts the requests that reached it (nil: none can).
		endpoint func(t *testing.T) (url string, arrivals func() int)
	}{
		{"every answer 500 InternalError", func(t *testing.T) (string, func() int) {
			srv := newFaultyS3(t, false)
			srv.setPlan(func(string, int) fault { return internalError })
			return srv.URL, func() int { a, _ := srv.counts(); return a["PutObject"] }
		}},
		{"every connection refused", func(t *testing.T) (string, func() int) {
			// A port that was just listened on and closed: nothing
			// listens there, so every dial is refused.
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := ln.Addr().String()
			ln.Close()
			return "http://" + addr, nil
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			url, arrivals := tc.endpoint(t)
			base := &http.Transport{}
			defer base.CloseIdleConnections()
			var seen keyCounter
			tr := awssdk.S3Transport(base, seen.hooks())
			client := s3.New(s3.Options{
				Region: "us-east-1", BaseEndpoint: aws.String(url), UsePathStyle: true,
				Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
				HTTPClient:  &http.Client{Transport: tr}, Retryer: awssdk.S3Retryer(shortBackoff),
			})
			var wg sync.WaitGroup
			var failed, refused atomic.Int32
			for w := range workers {
				wg.Go(func() {
					for i := range perWorker {
						ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
						_, err := client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket),
							Key: aws.String(fmt.Sprintf("w%d-%d", w, i)), Body: bytes.NewReader([]byte("x"))})
						cancel()
						if err != nil {
							failed.Add(1)
						}
						if errors.Is(err, resilience.ErrCircuitOpen) {
							refused.Add(1)
						}
					}
				})
			}
			wg.Wait()
			sent := 0
			seen.mu.Lock()
			for _, n := range seen.n {
				sent += n
			}
			seen.mu.Unlock()
			h, _ := tr.Stats().Host(strings.TrimPrefix(url, "http://"))
			t.Logf("%s: %d operations, %d failed (%d refused by the open breaker), %d requests sent, %.2f per operation; breaker %v",
				tc.name, workers*perWorker, failed.Load(), refused.Load(), sent, float64(sent)/(workers*perWorker), h.Breaker)
			if arrivals != nil && arrivals() != sent {
				t.Errorf("%d arrivals, but gotry sent %d", arrivals(), sent)
			}
			if h.Breaker != resilience.BreakerOpen {
				t.Errorf("breaker %v in an outage, want open", h.Breaker)
			}
			if int(failed.Load()) != workers*perWorker {
				t.Errorf("%d of %d operations failed in a total outage", failed.Load(), workers*perWorker)
			}
			// The breaker opens after 5 failures; each worker's SDK may
			// have up to its three attempts in flight or to come as it
			// opens. After that nothing is sent.
			if max := resilience.DefaultFailureThreshold + workers*3; sent > max {
				t.Errorf("%d requests sent, want at most %d: the breaker did not stop them", sent, max)
			}
		})
	}
}

// s3CodeError is an S3 error as the SDK's retryer sees it: its code.
type s3CodeError string

func (e s3CodeError) Error() string     { return "api error " + string(e) }
func (e s3CodeError) ErrorCode() string { return string(e) }

// S3Retryer's backoff: after a throttle, at least half the ceiling the
// SDK's own backoff draws from (1 s, doubling, at most MaxBackoff); after
// anything else, the SDK's own (50 ms, doubling, full jitter).
func TestS3RetryerWaitsOutThrottles(t *testing.T) {
	cases := []struct {
		name    string
		opts    []func(*retry.StandardOptions)
		attempt int
		err     error
		lo, hi  time.Duration // every delay in [lo, hi)
	}{
		{"SlowDown after the first attempt", nil, 1, s3CodeError("SlowDown"), 500 * time.Millisecond, time.Second},
		{"SlowDown after the second", nil, 2, s3CodeError("SlowDown"), time.Second, 2 * time.Second},
		{"SlowDown after the sixth, at MaxBackoff", nil, 6, s3CodeError("SlowDown"), 10 * time.Second, 20 * time.Second},
		{"SlowDown under a 20ms MaxBackoff", []func(*retry.StandardOptions){shortBackoff}, 3, s3CodeError("SlowDown"), 10 * time.Millisecond, 20 * time.Millisecond},
		{"InternalError keeps the SDK's backoff", nil, 1, s3CodeError("InternalError"), 0, 50 * time.Millisecond},
		{"InternalError after the second", nil, 2, s3CodeError("InternalError"), 0, 100 * time.Millisecond},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := awssdk.S3Retryer(tc.opts...)
			lo, hi := time.Duration(1<<62), time.Duration(0)
			for range 1000 {
				d, err := r.RetryDelay(tc.attempt, tc.err)
				if err != nil {
					t.Fatal(err)
				}
				lo, hi = min(lo, d), max(hi, d)
			}
			t.Logf("1000 delays in [%v, %v]", lo, hi)
			if lo < tc.lo || hi >= tc.hi {
				t.Errorf("delays in [%v, %v], want within [%v, %v)", lo, hi, tc.lo, tc.hi)
			}
		})
	}
}
