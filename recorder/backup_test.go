package recorder

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/mdbus/mdbus/internal/labtest"
	"github.com/mdbus/mdbus/internal/netlab"
	"github.com/mdbus/mdbus/journal"
	"github.com/mdbus/mdbus/packetconn/impair"
	"github.com/mdbus/mdbus/publisher"
	"github.com/mdbus/mdbus/retransmit"
	"github.com/stretchr/testify/require"
)

// TestRecorderUpstreamBackup: the recorder's Upstream is down and its
// feed loses 5%; the backup retransmitter fills every hole, so the
// journal holds the whole session.
func TestRecorderUpstreamBackup(t *testing.T) {
	netlab.Require(t)
	feed := netip.MustParseAddrPort("239.192.41.3:32413")
	cache := retransmit.NewCache(retransmit.CacheConfig{})
	srv, err := retransmit.NewServer(retransmit.ServerConfig{Listen: netip.MustParseAddrPort("127.0.0.1:0"), Sources: []retransmit.Source{cache}})
	require.NoError(t, err)
	defer srv.Close()
	deadAddr := labtest.RefusedAddr(t)

	j, err := journal.Open(t.TempDir(), journal.Config{})
	require.NoError(t, err)
	defer j.Close()
	rec, err := NewRecorder(Config{Feed: feed, Journal: j, Upstream: deadAddr, UpstreamBackups: []netip.AddrPort{srv.Addr()},
		Wrap: impair.Receiver(impair.Config{Loss: 0.05, Seed: 3})})
	require.NoError(t, err)
	defer rec.Close()
	pub, err := publisher.New(publisher.Config{Group: feed, Session: "BACKUP", Sinks: []publisher.Sink{cache}, RateMessages: 50_000})
	require.NoError(t, err)
	const n = 5000
	for i := range n {
		_, err := pub.Publish(fmt.Appendf(nil, "m%d", i+1))
		require.NoError(t, err)
	}
	require.NoError(t, pub.Close())
	waitFor(t, 10*time.Second, "end of session recorded", func() bool {
		ts, _ := rec.Stats()
		return ts.Ended == 1
	})
	fst := rec.FeedStats()
	t.Logf("feed: gaps %d, NAKs %d, recovered %d, lost %d, failovers %d", fst.Gaps, fst.NAKs, fst.Recovered, fst.LostMessages, fst.Failovers)
	require.Positive(t, fst.Gaps)
	require.Zero(t, fst.LostMessages)
	require.Positive(t, fst.Failovers) // 1 on time; a slow answer under -race can add a round
	require.Positive(t, srv.Stats().Answered)
	streams := j.Streams()
	require.Len(t, streams, 1)
	recs := readAll(t, j, streams[0].ID)
	require.Len(t, recs, n)
	for i, r := range recs {
		require.Equal(t, fmt.Sprintf("m%d", i+1), string(r.Data))
	}
}
