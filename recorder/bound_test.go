package recorder

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mdbus/mdbus/internal/netlab"
	"github.com/mdbus/mdbus/journal"
	"github.com/mdbus/mdbus/publisher"
)

// TestRecorderStreamBound: streams beyond Config.MaxStreams are not
// journaled, and Stats counts their packets instead of staying silent.
func TestRecorderStreamBound(t *testing.T) {
	netlab.Require(t)
	feed := netip.MustParseAddrPort("239.192.41.7:32417")
	j, err := journal.Open(t.TempDir(), journal.Config{Sync: journal.SyncNone})
	require.NoError(t, err)
	defer j.Close()
	rec, err := NewRecorder(Config{Feed: feed, Journal: j, MaxStreams: 2, MaxStreamsPerSource: -1})
	require.NoError(t, err)
	defer rec.Close()
	var pubs []*publisher.Publication
	for i := range 4 {
		pub, err := publisher.New(publisher.Config{Group: feed, Session: fmt.Sprintf("BOUND%d", i)})
		require.NoError(t, err)
		defer pub.Close()
		pubs = append(pubs, pub)
	}
	for round := range 20 {
		for _, pub := range pubs {
			_, err := pub.Publish(fmt.Appendf(nil, "round %d", round))
			require.NoError(t, err)
		}
	}
	waitFor(t, 5*time.Second, "two streams journaled, the others refused", func() bool {
		ts, _ := rec.Stats()
		return ts.Messages == 40 && ts.RefusedPackets > 0
	})
	ts, err := rec.Stats()
	require.NoError(t, err)
	require.EqualValues(t, 2, ts.Incarnations)
	require.Len(t, j.Streams(), 2)
}

// TestRecorderPacketMarks: the recorder keeps which messages shared a
// packet on the wire, and stamps a packet's messages with one time.
func TestRecorderPacketMarks(t *testing.T) {
	netlab.Require(t)
	feed := netip.MustParseAddrPort("239.192.41.8:32418")
	j, err := journal.Open(t.TempDir(), journal.Config{Sync: journal.SyncNone})
	require.NoError(t, err)
	defer j.Close()
	rec, err := NewRecorder(Config{Feed: feed, Journal: j})
	require.NoError(t, err)
	defer rec.Close()
	pub, err := publisher.New(publisher.Config{Group: feed, Session: "MARKS"})
	require.NoError(t, err)
	batch := [][]byte{[]byte("a"), []byte("b"), []byte("c")}
	for i := range 5 {
		_, err := pub.PublishBatch(batch)
		require.NoError(t, err)
		require.NoError(t, pub.Flush(t.Context()))
		// Each packet journaled before the next is sent: every packet
		// arrives in a read of its own and gets a stamp of its own.
		waitFor(t, 5*time.Second, "packet journaled", func() bool {
			ts, _ := rec.Stats()
			return ts.Messages == uint64(3*(i+1))
		})
	}
	require.NoError(t, pub.Close())
	waitFor(t, 5*time.Second, "end of session recorded", func() bool {
		ts, _ := rec.Stats()
		return ts.Ended == 1
	})
	r, err := j.OpenReader(j.Streams()[0].ID)
	require.NoError(t, err)
	defer r.Close()
	var starts int
	var pktTime int64
	for range 15 {
		rec, err := r.Next()
		require.NoError(t, err)
		if rec.Packet == journal.PacketStart {
			starts++
			pktTime = rec.Time
		} else {
			require.Equal(t, journal.PacketSame, rec.Packet)
			require.Equal(t, pktTime, rec.Time, "one time per packet")
		}
	}
	require.Equal(t, 5, starts, "five packets of three messages")
}
