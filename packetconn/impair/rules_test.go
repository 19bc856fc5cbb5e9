package impair

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/mdbus/mdbus/wire"
	"github.com/stretchr/testify/require"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want []string // substrings of the error; none: valid
	}{
		{"zero", Config{}, nil},
		{"all set", Config{Loss: 1, Duplicate: 0.5, Reorder: 0.1, ReorderDepth: 7, ReorderWait: time.Second,
			Delay: time.Millisecond, Jitter: time.Millisecond, MaxHeld: 10, OnlyData: true}, nil},
		{"loss above 1", Config{Loss: 1.5}, []string{"Loss 1.5"}},
		{"negative duplicate", Config{Duplicate: -0.1}, []string{"Duplicate -0.1"}},
		{"NaN reorder", Config{Reorder: math.NaN()}, []string{"Reorder NaN"}},
		{"negative depth", Config{ReorderDepth: -1}, []string{"ReorderDepth -1"}},
		{"huge depth", Config{ReorderDepth: MaxReorderDepth + 1}, []string{"ReorderDepth"}},
		{"negative wait", Config{ReorderWait: -time.Second}, []string{"ReorderWait"}},
		{"wait too long", Config{ReorderWait: 2 * MaxDelay}, []string{"ReorderWait"}},
		{"negative delay", Config{Delay: -1}, []string{"Delay -1ns"}},
		{"negative jitter", Config{Jitter: -1}, []string{"Jitter -1ns"}},
		{"delay plus jitter too long", Config{Delay: MaxDelay, Jitter: 1}, []string{"Delay+Jitter"}},
		{"negative MaxHeld", Config{MaxHeld: -1}, []string{"MaxHeld -1"}},
		{"several at once", Config{Loss: 2, Duplicate: 2, MaxHeld: -1}, []string{"Loss 2", "Duplicate 2", "MaxHeld -1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if tc.want == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrInvalidConfig)
			for _, w := range tc.want {
				require.Contains(t, err.Error(), w)
			}
			require.True(t, strings.HasPrefix(err.Error(), "impair: invalid config: "), err.Error())
			_, err = NewReceiver(newFake(t), tc.cfg)
			require.ErrorIs(t, err, ErrInvalidConfig)
			_, err = NewSender(newFake(t), tc.cfg)
			require.ErrorIs(t, err, ErrInvalidConfig)
			require.Panics(t, func() { Receiver(tc.cfg) })
			require.Panics(t, func() { Sender(tc.cfg) })
		})
	}
}

func TestRules(t *testing.T) {
	p5x3 := dataPacket(5, 3) // sequences 5, 6, 7
	p1 := dataPacket(1, 1)
	hb := wire.AppendHeartbeat(nil, testSession, 6)
	eos := wire.AppendEndOfSession(nil, testSession, 6)
	req := wire.AppendRequest(nil, wire.Request{Session: testSession, Seq: 6, Count: 1})
	top := dataPacket(math.MaxUint64-1, 1)
	// A header whose count runs past the largest sequence.
	wrap := append(wire.AppendHeader(nil, wire.Header{Session: testSession, Seq: math.MaxUint64 - 1, Count: 5}), 0, 0)
	for _, tc := range []struct {
		name string
		rule func([]byte) bool
		pkt  []byte
		want bool
	}{
		{"seqs: first of packet", DropSeqs(5), p5x3, true},
		{"seqs: middle of packet", DropSeqs(6), p5x3, true},
		{"seqs: last of packet", DropSeqs(7), p5x3, true},
		{"seqs: just before", DropSeqs(4), p5x3, false},
		{"seqs: just after", DropSeqs(8), p5x3, false},
		{"seqs: unsorted duplicates", DropSeqs(9, 1, 9, 1), p1, true},
		{"seqs: none", DropSeqs(), p1, false},
		{"seqs: heartbeat never", DropSeqs(6), hb, false},
		{"seqs: end of session never", DropSeqs(6), eos, false},
		{"seqs: re-request never", DropSeqs(6), req, false},
		{"seqs: short datagram", DropSeqs(6), p5x3[:10], false},
		{"seqs: nil", DropSeqs(6), nil, false},
		{"seqs: top of range", DropSeqs(math.MaxUint64 - 1), top, true},
		{"seqs: count past the top", DropSeqs(math.MaxUint64), wrap, true},
		{"range: covers packet", DropRange(1, 100), p5x3, true},
		{"range: overlaps first", DropRange(1, 5), p5x3, true},
		{"range: overlaps last", DropRange(7, 9), p5x3, true},
		{"range: inside", DropRange(6, 6), p5x3, true},
		{"range: before", DropRange(1, 4), p5x3, false},
		{"range: after", DropRange(8, 9), p5x3, false},
		{"range: empty", DropRange(7, 5), p5x3, false},
		{"range: to the end", DropRange(7, math.MaxUint64), p5x3, true},
		{"range: heartbeat never", DropRange(0, math.MaxUint64), hb, false},
		{"heartbeats: heartbeat", DropHeartbeats(), hb, true},
		{"heartbeats: end of session", DropHeartbeats(), eos, false},
		{"heartbeats: data", DropHeartbeats(), p1, false},
		{"heartbeats: short", DropHeartbeats(), hb[:19], false},
		{"any: second matches", AnyOf(nil, DropSeqs(100), DropSeqs(6)), p5x3, true},
		{"any: none match", AnyOf(DropSeqs(100), DropHeartbeats()), p5x3, false},
		{"any: empty", AnyOf(), p5x3, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, tc.rule(tc.pkt))
		})
	}
	require.True(t, IsData(p1))
	require.False(t, IsData(hb))
	require.False(t, IsData(req))
}

func TestRulesDoNotAllocate(t *testing.T) {
	r := AnyOf(DropSeqs(3, 9, 27), DropRange(100, 200), DropHeartbeats())
	p := dataPacket(150, 2)
	require.Zero(t, testing.AllocsPerRun(1000, func() { _ = r(p) }))
}

// FuzzRules checks the rules against a plain reference on any datagram:
// no panic, and DropSeqs/DropRange agree with walking the header's range.
func FuzzRules(f *testing.F) {
	f.Add(dataPacket(5, 3), uint64(6), uint64(6), uint64(7))
	f.Add(wire.AppendHeartbeat(nil, testSession, 6), uint64(6), uint64(1), uint64(9))
	f.Add(wire.AppendEndOfSession(nil, testSession, 6), uint64(6), uint64(1), uint64(9))
	f.Add(wire.AppendRequest(nil, wire.Request{Session: testSession, Seq: 6, Count: 1}), uint64(6), uint64(1), uint64(9))
	f.Add([]byte{}, uint64(0), uint64(0), uint64(0))
	f.Add(append(wire.AppendHeader(nil, wire.Header{Seq: math.MaxUint64, Count: 0xFFFE}), 1, 2), uint64(math.MaxUint64), uint64(0), uint64(math.MaxUint64))
	f.Fuzz(func(t *testing.T, pkt []byte, s, from, to uint64) {
		inSeqs, inRange := false, false
		if len(pkt) > wire.HeaderLen+1 {
			h, err := wire.ParseHeader(pkt)
			require.NoError(t, err)
			if h.Count != wire.CountHeartbeat && h.Count != wire.CountEndOfSession {
				for i := range uint64(h.Count) {
					q := uint64(h.Seq) + i
					if q < uint64(h.Seq) {
						break // past the largest sequence
					}
					inSeqs = inSeqs || q == s
					inRange = inRange || from <= q && q <= to
				}
			}
		}
		require.Equal(t, inSeqs, DropSeqs(wire.Seq(s))(pkt), "DropSeqs(%d)", s)
		require.Equal(t, inRange, DropRange(wire.Seq(from), wire.Seq(to))(pkt), "DropRange(%d, %d)", from, to)
		_ = DropHeartbeats()(pkt)
	})
}
