package bench

import "testing"

// checkFleet checks what the fleet scenario counted, never timings: in the
// outage, gotry's fleets stay within the budget's fleet bound whatever the
// run's length, and the peers within their attempt caps; along a chain the
// leaf sees no more than the hops' bounds compose to; the slow host got
// every request.
func checkFleet(t *testing.T, f *FleetResult) {
	if f == nil {
		t.Fatal("the fleet scenario did not run")
	}
	if want := len(fleetShapes) * len(fleetCandidates); len(f.Outage) != want || len(f.Flaky) != want {
		t.Fatalf("%d outage and %d flaky rows, want %d each", len(f.Outage), len(f.Flaky), want)
	}
	for _, r := range f.Outage {
		if r.Requests == 0 || r.OK != 0 || r.Server < r.Requests || r.Server > fleetAttempts*r.Requests {
			t.Errorf("outage, %d × %g/s, %s: %d requests, %d succeeded, %d attempts at the server",
				r.Shape.Clients, r.Shape.PerClient, r.Name, r.Requests, r.OK, r.Server)
		}
		if r.Name != fleetCandidates[0].name {
			continue
		}
		if bound := fleetBound(r.Requests, int64(r.Shape.Clients)); r.Server > bound {
			t.Errorf("outage, %d × %g/s: gotry sent %d attempts for %d requests, past the fleet bound %d",
				r.Shape.Clients, r.Shape.PerClient, r.Server, r.Requests, bound)
		}
	}
	for _, r := range f.Flaky {
		if r.Name == fleetCandidates[0].name && r.Success < 0.98 {
			t.Errorf("5%% 503s, %d × %g/s: gotry's fleet succeeded for %.2f%% of requests, want at least 98%% even in a short run",
				r.Shape.Clients, r.Shape.PerClient, 100*r.Success)
		}
	}
	if f.Chain == nil || len(f.Chain.Rows) != 2*len(chainRates)*len(chainSetups) {
		t.Fatalf("chain rows: %+v", f.Chain)
	}
	for _, r := range f.Chain.Rows {
		if r.Requests == 0 || r.Arrivals < r.OK {
			t.Errorf("chain %s at %g/s, leaf %s: %d requests, %d arrivals, %d succeeded", r.Name, r.Rate, r.Leaf, r.Requests, r.Arrivals, r.OK)
		}
		if r.Leaf != "down" {
			continue
		}
		if r.Name == chainSetups[0].name {
			// Every hop is one gotry client: its attempts are at most its
			// bound for the requests it got.
			if b := budgetBound(budgetBound(budgetBound(r.Requests))); r.Arrivals > b {
				t.Errorf("chain at %g/s: %d leaf arrivals for %d requests, past the hops' bound %d", r.Rate, r.Arrivals, r.Requests, b)
			}
		} else if cap := int64(fleetAttempts * fleetAttempts * fleetAttempts); r.Arrivals > cap*r.Requests {
			t.Errorf("chain %s at %g/s: %d leaf arrivals for %d requests, past %d each", r.Name, r.Rate, r.Arrivals, r.Requests, cap)
		}
	}
	if f.Slow == nil || len(f.Slow.Rows) != 4 {
		t.Fatalf("slow host rows: %+v", f.Slow)
	}
	want := int64(f.Slow.Rate * (f.Slow.Before + f.Slow.Drop + f.Slow.After).Seconds())
	for _, r := range f.Slow.Rows {
		if r.Sent != want {
			t.Errorf("slow host, %s: %d requests sent, want %d", r.Name, r.Sent, want)
		}
	}
}
