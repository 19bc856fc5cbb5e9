package nak

import (
	"testing"
	"time"

	"github.com/mdbus/mdbus/internal/monotime"
	"github.com/mdbus/mdbus/wire"
)

// universe bounds the sequences whose backoff the fuzzer models; mostly
// only overflowed (doomed) ranges reach beyond it.
const universe = 512

// FuzzLossDetector drives a detector with random operation sequences and
// checks, after every operation, that it does not panic, that its internal
// invariants hold, that Pending stays within MaxPending, that Poll only
// asks for and gives up tracked messages, never a message inside its
// backoff, and that requests respect MaxRequest.
func FuzzLossDetector(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0, 10, 5, 2, 20, 0, 1, 12, 2, 2, 40, 2, 200, 0})
	f.Add([]byte{7, 3, 9, 1, 3, 5, 0, 0, 0, 30, 1, 40, 0, 31, 2, 250, 1, 0, 5, 9, 0, 5, 9, 0})
	f.Add([]byte{1, 60, 2, 4, 0, 0, 31, 1, 4, 7, 2, 0, 1, 2, 3, 5, 5, 5, 4, 1, 1, 0, 9, 9})
	f.Add([]byte{255, 255, 255, 255, 3, 1, 1, 2, 0, 0, 0, 200, 31, 5, 0, 0, 6, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 4 {
			return
		}
		gen := DelayGenerator(nil)
		if data[0]&0x80 != 0 {
			gen = FixedDelay(time.Duration(data[0]&7) * 100 * time.Microsecond)
		}
		cfg := Config{
			Delay:      time.Duration(data[0]&7+1) * 200 * time.Microsecond,
			Retry:      time.Duration(data[1]&15+1) * 100 * time.Microsecond,
			MaxRetry:   time.Duration(data[2]&31) * 200 * time.Microsecond,
			Deadline:   time.Duration(data[3]&63+1) * 500 * time.Microsecond,
			MaxRequest: int(data[1]>>4) + 1,
			MaxPending: uint64(data[2]>>5)*16 + 1,
			Seed:       uint64(data[3]) + 1,
			Generator:  gen,
		}
		data = data[4:]
		d := NewLossDetector(cfg)
		c := d.Config()
		now := t0

		var count [universe]int          // NAKs of each tracked sequence since it was last untracked
		var last [universe]monotime.Time // time of its last NAK
		forget := func(r Range) {
			for s := r.From; s < r.To && s < universe; s++ {
				count[s] = 0
			}
		}
		var reqs, lost, before []Range
		tracked := func(ranges []Range, r Range) bool { // r within the union of sorted ranges
			for _, x := range ranges {
				if r.From >= x.From && r.From < x.To {
					if r.To <= x.To {
						return true
					}
					r.From = x.To
				}
			}
			return false
		}

		for ops := 0; len(data) >= 3 && ops < 1000; ops++ {
			op, a, b := data[0], wire.Seq(data[1]), wire.Seq(data[2])
			data = data[3:]
			switch op % 8 {
			case 0, 1: // a gap in the universe
				d.OnGap(now, Range{a, a + b%40})
			case 2: // an arrival
				r := Range{a, a + b%40}
				// An arrival that fills messages already asked for (but
				// for one strictly inside a single range) is a partial
				// answer: the ranges already asked for that follow it
				// without a break are asked for again after
				// Config.Continue with their backoff restarted, so they
				// leave the backoff model (all of the run, a superset of
				// the MaxRequest messages hurried).
				var rest []Range
				answer, inside := false, false
				for _, e := range d.entries {
					if e.from < r.To && e.to > r.From {
						answer = answer || e.naks > 0 && !e.doomed
						inside = inside || e.from < r.From && e.to > r.To
					}
				}
				if answer && !inside {
					from := r.To
					for _, e := range d.entries {
						if e.to <= from {
							continue
						}
						if e.from > from || e.naks == 0 || e.doomed {
							break
						}
						rest = append(rest, Range{from, e.to})
						from = e.to
					}
				}
				filled, age := d.OnReceived(now, r)
				for _, x := range rest {
					forget(x)
				}
				if filled > r.Len() || age < 0 || (filled == 0 && age != 0) {
					t.Fatalf("OnReceived(%v) = %d, %v", r, filled, age)
				}
				forget(r)
			case 3: // time passes, then Poll
				now = now.Add(time.Duration(a)*50*time.Microsecond + time.Duration(b))
				fallthrough
			case 4: // Poll at Next
				if op%8 == 4 {
					if at, ok := d.Next(); ok && at > now {
						now = at
					}
				}
				before = d.AppendMissing(before[:0])
				all := make([]Range, 0, len(d.entries)) // doomed too, in order
				for _, e := range d.entries {
					all = append(all, Range{e.from, e.to})
				}
				pending := d.Pending()
				reqs, lost = d.Poll(now, reqs[:0], lost[:0])
				var total uint64
				for _, r := range reqs {
					total += r.Len()
					if r.Len() == 0 || r.Len() > uint64(c.MaxRequest) {
						t.Fatalf("request %v: MaxRequest %d", r, c.MaxRequest)
					}
					if !tracked(before, r) {
						t.Fatalf("request %v not tracked (tracked %v)", r, before)
					}
					// AppendMissing excludes doomed ranges, so tracked above also
					// proves no overflowed message is requested. Past the
					// universe (small gaps appended to a huge doomed one) the
					// backoff is not modelled.
					for s := r.From; s < min(r.To, universe); s++ {
						if count[s] > 0 {
							backoff := min(c.Retry<<min(count[s]-1, 40), c.MaxRetry)
							if now.Sub(last[s]) < backoff {
								t.Fatalf("seq %d asked again after %v, backoff %v", s, now.Sub(last[s]), backoff)
							}
						}
						count[s]++
						last[s] = now
					}
				}
				if total > pending {
					t.Fatalf("requested %d messages, %d pending", total, pending)
				}
				for _, r := range lost {
					if !tracked(all, r) {
						t.Fatalf("lost %v not tracked", r)
					}
					for _, q := range reqs {
						if q.From < r.To && r.From < q.To {
							t.Fatalf("lost %v overlaps request %v", r, q)
						}
					}
					forget(r)
				}
				after := d.AppendMissing(nil)
				for _, r := range lost {
					for _, x := range after {
						if x.From < r.To && r.From < x.To {
							t.Fatalf("lost %v still tracked", r)
						}
					}
				}
			case 5: // a heartbeat far ahead
				d.OnGap(now, Range{a, a + 1<<40 + b})
			case 6: // rare: give up or reset
				switch b % 16 {
				case 0:
					for _, r := range d.GiveUp(nil) {
						forget(r)
					}
				case 1:
					d.Reset()
					forget(Range{0, universe})
				case 2, 3, 4, 5: // a confirm, sending or later
					after := time.Duration(a%4) * time.Millisecond
					if rtt, ok := d.OnConfirm(now, Range{a, a + b%40}, after); ok && rtt < 0 {
						t.Fatalf("OnConfirm rtt %v", rtt)
					}
				case 6, 7: // requests sized to a packet
					d.SetMaxRequest(int(a % 64))
					if m := d.MaxRequest(); m < 1 || m > c.MaxRequest {
						t.Fatalf("MaxRequest %d outside [1, %d]", m, c.MaxRequest)
					}
				}
			case 7: // a big arrival
				r := Range{a, a + 1<<41}
				d.OnReceived(now, r)
				forget(r)
			}
			if err := d.checkInvariants(); err != nil {
				t.Fatalf("op %d: %v", ops, err)
			}
			if d.Pending() > c.MaxPending {
				t.Fatalf("Pending %d > MaxPending %d", d.Pending(), c.MaxPending)
			}
			st := d.Stats()
			if st.GapMessages != st.Filled+st.LostMessages+d.Pending()+d.doomed {
				t.Fatalf("accounting: %+v, pending %d, doomed %d", st, d.Pending(), d.doomed)
			}
		}
	})
}
