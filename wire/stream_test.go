package wire

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestStreamIDString(t *testing.T) {
	s, err := ParseSession("ABC")
	require.NoError(t, err)
	src := netip.MustParseAddrPort("10.1.2.3:40000")
	for _, tc := range []struct {
		id   StreamID
		want string
	}{
		{StreamID{Source: src, Session: s, Incarnation: 1}, "ABC@10.1.2.3:40000"},
		{StreamID{Source: src, Session: s}, "ABC@10.1.2.3:40000"},
		{StreamID{Source: src, Session: s, Incarnation: 2}, "ABC@10.1.2.3:40000#2"},
		{StreamID{Session: s, Incarnation: 3}, "ABC@-#3"},
		{StreamID{Source: netip.MustParseAddrPort("[ff02::1]:5"), Session: s, Incarnation: 1}, "ABC@[ff02::1]:5"},
	} {
		require.Equal(t, tc.want, tc.id.String())
	}
}

// TestStreamPosFit pins the incarnation rule that subscribers, recorders
// and capture importers share.
func TestStreamPosFit(t *testing.T) {
	data := func(seq Seq, n uint16) Header { return Header{Seq: seq, Count: n} }
	hb := func(seq Seq) Header { return Header{Seq: seq, Count: CountHeartbeat} }
	end := func(seq Seq) Header { return Header{Seq: seq, Count: CountEndOfSession} }
	live := StreamPos{High: 101, Next: 101} // delivered 1..100
	holed := StreamPos{High: 101, Next: 51} // 51.. missing, up to 100 seen
	ended := StreamPos{High: 101, Next: 101, Ended: true}
	far := StreamPos{High: 200_000, Next: 200_000}
	for _, tc := range []struct {
		name string
		pos  StreamPos
		h    Header
		want Fit
	}{
		{"nothing seen yet", StreamPos{}, data(1, 1), Continues},
		{"in order", live, data(101, 3), Continues},
		{"ahead: a gap", live, data(150, 1), Continues},
		{"heartbeat at next", live, hb(101), Continues},
		{"end of session", live, end(101), Continues},
		{"end of session going back", live, end(5), Continues},
		{"duplicate", live, data(90, 5), Repeats},
		{"fills a hole", holed, data(51, 5), Continues},
		{"straddles what was taken", holed, data(49, 5), Continues},
		{"sequence 1 again", live, data(1, 2), Restarts},
		{"sequence 1 filling the first hole", StreamPos{High: 10, Next: 1}, data(1, 2), Continues},
		{"heartbeat going back", live, hb(50), Restarts},
		{"heartbeat inside a hole", holed, hb(60), Continues},
		{"far back", far, data(200_000-RestartDistance-1, 1), Restarts},
		{"back, within the distance", far, data(200_000-RestartDistance, 1), Repeats},
		{"after the end: a late copy", ended, data(90, 5), Repeats},
		{"after the end: sequence 1", ended, data(1, 1), Restarts},
		{"after the end: beyond it", ended, data(101, 1), BeyondEnd},
		{"after the end: a heartbeat at it", ended, hb(101), Continues},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, tc.pos.Fit(tc.h), "got %v", tc.pos.Fit(tc.h))
		})
	}
}

func TestStreamPosFitAllocs(t *testing.T) {
	pos := StreamPos{High: 101, Next: 101}
	h := Header{Seq: 1, Count: 1}
	require.Zero(t, testing.AllocsPerRun(100, func() { _ = pos.Fit(h) }))
}
