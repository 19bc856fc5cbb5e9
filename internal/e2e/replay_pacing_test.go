package e2e

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mdbus/mdbus/internal/monotime"
	"github.com/mdbus/mdbus/internal/netlab"
	"github.com/mdbus/mdbus/journal"
	"github.com/mdbus/mdbus/publisher"
	"github.com/mdbus/mdbus/replay"
	"github.com/mdbus/mdbus/subscriber"
	"github.com/mdbus/mdbus/wire"
	"github.com/stretchr/testify/require"
)

// replaySpan is the recorded span of the synthesized capture:
// MDBUS_REPLAY_SPAN (for example 60s for the acceptance run), else 5 s (2 s
// under -race or -short).
func replaySpan(t *testing.T) time.Duration {
	if v := os.Getenv("MDBUS_REPLAY_SPAN"); v != "" {
		d, err := time.ParseDuration(v)
		require.NoError(t, err)
		return d
	}
	return time.Duration(scale(5, 2)) * time.Second
}

// synthCapture journals messages at random gaps (0 to 10 ms) spanning
// span, each carrying its sequence, and returns its stream and timestamps.
func synthCapture(t *testing.T, j *journal.Journal, span time.Duration) (journal.StreamID, []int64) {
	session, _ := wire.ParseSession("PACED")
	w, err := j.Create(session, netip.MustParseAddrPort("127.0.0.1:9"), 1)
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(60, 1))
	ts := time.Date(2026, 11, 30, 14, 30, 0, 0, time.UTC).UnixNano()
	end := ts + int64(span)
	var stamps []int64
	msg := make([]byte, 32)
	for seq := wire.Seq(1); ts <= end; seq++ {
		binary.BigEndian.PutUint64(msg, uint64(seq))
		require.NoError(t, w.Append(seq, ts, msg))
		stamps = append(stamps, ts)
		ts += rng.Int64N(int64(10 * time.Millisecond))
	}
	id := w.ID()
	require.NoError(t, w.Close())
	return id, stamps
}

// Acceptance: a replay at recorded pace puts each message on the wire at
// its recorded offset from the first (measured at a subscriber in the
// lab), within 1 ms; --speed 10 scales the offsets; no drift over the
// whole replay. With MDBUS_REPLAY_SPAN=60s on a quiet machine the
// sender-side error is p99 <= 100 µs, max <= 1 ms.
func TestAcceptanceReplayPacing(t *testing.T) {
	netlab.Require(t)
	span := replaySpan(t)
	j, err := journal.Open(t.TempDir(), journal.Config{})
	require.NoError(t, err)
	defer j.Close()
	id, stamps := synthCapture(t, j, span)
	for _, speed := range []float64{1, 10} {
		t.Run(fmt.Sprintf("speed %v", speed), func(t *testing.T) {
			group := netip.MustParseAddrPort(fmt.Sprintf("239.192.28.%d:32090", int(speed)))
			arrive := make([]int64, len(stamps)+1)
			emitted := make([]int64, 0, len(stamps))
			var mu sync.Mutex
			got := 0
			sub, err := subscriber.New(subscriber.Config{Group: group, OnMessage: func(m subscriber.Message) {
				now := int64(monotime.Now())
				mu.Lock()
				if s := binary.BigEndian.Uint64(m.Data); s == uint64(m.Seq) && int(s) < len(arrive) {
					arrive[s] = now
					got++
				}
				mu.Unlock()
			}})
			require.NoError(t, err)
			defer sub.Close()
			pub, err := publisher.New(publisher.Config{Group: group, Session: "PACED"})
			require.NoError(t, err)
			defer pub.Close()
			_, err = replay.Run(context.Background(), replay.Config{Speed: speed}, replay.Options{
				Open: func() (replay.Source, error) {
					r, err := j.OpenReader(id)
					return r, err
				},
				Emit: func(r journal.Record) error {
					emitted = append(emitted, int64(monotime.Now()))
					_, err := pub.Publish(r.Data)
					return err
				},
			})
			require.NoError(t, err)
			waitFor(t, 5*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return got == len(stamps) })

			// Offset of each message: its arrival offset from the first
			// arrival minus its recorded offset scaled by the speed. The
			// first message's own delivery time (a cold path) shifts every
			// offset alike, so the error is also given centred on the
			// median offset (the path's constant latency removed).
			offs := make([]time.Duration, len(stamps))
			for i := range stamps {
				want := time.Duration(float64(stamps[i]-stamps[0]) / speed)
				offs[i] = time.Duration(arrive[i+1]-arrive[1]) - want
			}
			sorted := slices.Clone(offs)
			slices.Sort(sorted)
			med := sorted[len(sorted)/2]
			abs := func(d time.Duration) time.Duration { return d.Abs() }
			raw, centred := make([]time.Duration, len(offs)), make([]time.Duration, len(offs))
			for i, o := range offs {
				raw[i], centred[i] = abs(o), abs(o-med)
			}
			n := len(offs)
			// Drift: the median offset of the first third against the last
			// third (thirds, not tenths: one scheduler stall of a loaded
			// machine must not pass for a trend in a short replay).
			first, last := slices.Clone(offs[:n/3]), slices.Clone(offs[n-n/3:])
			slices.Sort(raw)
			slices.Sort(centred)
			slices.Sort(first)
			slices.Sort(last)
			pct := func(s []time.Duration, p float64) time.Duration { return s[min(len(s)-1, int(p*float64(len(s))))] }
			within := func(s []time.Duration) float64 {
				k, _ := slices.BinarySearch(s, time.Millisecond+1)
				return 100 * float64(k) / float64(len(s))
			}
			drift := pct(last, 0.5) - pct(first, 0.5)
			send := make([]time.Duration, n)
			for i := range stamps {
				send[i] = (time.Duration(emitted[i]-emitted[0]) - time.Duration(float64(stamps[i]-stamps[0])/speed)).Abs()
			}
			slices.Sort(send)
			t.Logf("  sender side (pacer only): error p50 %v p99 %v max %v, %.2f%% within 1 ms", pct(send, 0.5), pct(send, 0.99), send[n-1], within(send))
			t.Logf("speed %v: %d messages over %v recorded (%v replayed)", speed, n, span, time.Duration(float64(span)/speed).Round(time.Millisecond))
			t.Logf("  from the first arrival: error p50 %v p99 %v max %v, %.2f%% within 1 ms", pct(raw, 0.5), pct(raw, 0.99), raw[n-1], within(raw))
			t.Logf("  centred (constant latency %v removed): error p50 %v p99 %v max %v, %.2f%% within 1 ms", med, pct(centred, 0.5), pct(centred, 0.99), centred[n-1], within(centred))
			t.Logf("  drift: median offset first third %v, last third %v (%v)", pct(first, 0.5), pct(last, 0.5), drift)
			// Loose bounds: on a loaded machine (2 cores shared by many
			// test runs) wake-ups come late by tens of ms; the acceptance
			// numbers are the logged ones, from a quiet machine. A pacer
			// that drifted would still fail: the error would grow with the
			// replay's length (seconds over a 60 s replay).
			require.Less(t, pct(centred, 0.5), 10*time.Millisecond)
			// The pacer's own error (when Emit ran against when it was
			// due). Its median is what a loaded machine does not spoil:
			// a few hundred ns with the spin, ~400 µs with a pacer that
			// sleeps whenever more than 200 µs are left (a timer asked
			// for under 1 ms wakes after ~1.1 ms). Its p99 is the
			// acceptance figure, ≤ 100 µs on a quiet machine over a 60 s
			// span (README, Replay), but other processes that take the
			// core away make it anything: 15 ms with a load average of 6
			// on 2 cores. The pacer's logic under late timers is pinned by
			// replay's TestPacerTimerResolution.
			// At speed 10 messages are due every 0.5 ms on average: on a
			// machine with no free core the pacer falls behind, so the
			// median is asserted at the recorded pace only.
			if speed == 1 {
				require.LessOrEqual(t, pct(send, 0.5), 100*time.Microsecond, "pacer error p50")
			}
			require.Less(t, drift.Abs(), 10*time.Millisecond, "the error must not grow over the replay")
		})
	}
}
