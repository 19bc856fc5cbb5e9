package nak_test

import (
	"fmt"
	"time"

	"github.com/mdbus/mdbus/internal/monotime"
	"github.com/mdbus/mdbus/nak"
	"github.com/mdbus/mdbus/wire"
)

// A subscriber expecting sequence 100 receives a packet starting at 105: it
// reports the gap, asks when Next says so, and a repair fills part of it.
// The rest is asked for again after the backoff and finally given up.
func Example() {
	d := nak.NewLossDetector(nak.Config{
		Generator: nak.FixedDelay(time.Millisecond), // deterministic for the example
		Retry:     10 * time.Millisecond,
		MaxRetry:  20 * time.Millisecond,
		Deadline:  50 * time.Millisecond,
	})
	start := monotime.Time(0)
	d.OnGap(start, nak.Range{From: 100, To: 105})

	var reqs, lost []nak.Range
	repaired := false
	for {
		now, ok := d.Next()
		if !ok {
			break
		}
		reqs, lost = d.Poll(now, reqs[:0], lost[:0])
		for _, r := range reqs {
			req := wire.Request{Seq: r.From, Count: uint16(r.Len())}
			fmt.Printf("%v: re-request seq %d count %d\n", now.Sub(start), req.Seq, req.Count)
		}
		for _, r := range lost {
			fmt.Printf("%v: lost %v\n", now.Sub(start), r)
		}
		if !repaired {
			repaired = true
			at := now.Add(300 * time.Microsecond)
			filled, age := d.OnReceived(at, nak.Range{From: 100, To: 103})
			fmt.Printf("%v: repair filled %d, gap age %v\n", at.Sub(start), filled, age)
		}
	}
	st := d.Stats()
	fmt.Printf("NAKs %d, retries %d, filled %d, lost %d\n", st.NAKs, st.Retries, st.Filled, st.LostMessages)
	// Output:
	// 1ms: re-request seq 100 count 5
	// 1.3ms: repair filled 3, gap age 1.3ms
	// 3.3ms: re-request seq 103 count 2
	// 13.3ms: re-request seq 103 count 2
	// 33.3ms: re-request seq 103 count 2
	// 50ms: lost [103,105)
	// NAKs 4, retries 3, filled 3, lost 2
}

// A heartbeat claiming a sequence 2^40 ahead is declared lost at once by
// the MaxPending rule instead of being requested.
func Example_boundedGap() {
	d := nak.NewLossDetector(nak.Config{}) // MaxPending 65536
	d.OnGap(0, nak.Range{From: 1, To: 1<<40 + 1})
	reqs, lost := d.Poll(0, nil, nil)
	fmt.Println(len(reqs), lost, d.Pending(), d.Stats().Overflows)
	// Output: 0 [[1,1099511627777)] 0 1
}
