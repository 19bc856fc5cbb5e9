package pcap

import (
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mdbus/mdbus/internal/netlab"
	"github.com/mdbus/mdbus/journal"
	"github.com/mdbus/mdbus/publisher"
	"github.com/mdbus/mdbus/recorder"
	"github.com/mdbus/mdbus/wire"
)

// sentPackets is a publisher.Sink keeping a copy of every data packet
// sent: what a capture of the live feed holds.
type sentPackets struct {
	mu   sync.Mutex
	pkts [][]byte
}

func (s *sentPackets) SentPacket(pkt []byte) {
	s.mu.Lock()
	s.pkts = append(s.pkts, bytes.Clone(pkt))
	s.mu.Unlock()
}

// TestExportPacketGrouping records a live feed whose packets carry 1 to
// 40 messages (mdbus record in the lab), exports the journal and checks
// that the capture holds the same packets as were sent: same count, same
// first sequence and messages in each; with tshark, that tshark shows the
// same packets too.
func TestExportPacketGrouping(t *testing.T) {
	netlab.Require(t)
	feed := netip.MustParseAddrPort("239.192.43.1:32431")
	j, err := journal.Open(t.TempDir(), journal.Config{Sync: journal.SyncNone})
	require.NoError(t, err)
	defer j.Close()
	rec, err := recorder.NewRecorder(recorder.Config{Feed: feed, Journal: j})
	require.NoError(t, err)
	defer rec.Close()

	var sent sentPackets
	pub, err := publisher.New(publisher.Config{Group: feed, Session: "GROUPING", Sinks: []publisher.Sink{&sent}, Grace: -1})
	require.NoError(t, err)
	total := 0
	for i := range 300 {
		batch := make([][]byte, 1+(i*7)%40)
		for k := range batch {
			batch[k] = fmt.Appendf(nil, "burst %d message %d %s", i, k, bytes.Repeat([]byte{'x'}, (i+k)%30))
		}
		_, err := pub.PublishBatch(batch)
		require.NoError(t, err)
		total += len(batch)
		if i%10 == 0 {
			// Flush sends what is queued, so the next burst starts a packet
			// of its own; waiting for the recorder to journal it keeps the
			// feed within the recorder's receive buffer (nothing repairs a
			// loss here).
			require.NoError(t, pub.Flush(t.Context()))
			require.Eventually(t, func() bool {
				ts, err := rec.Stats()
				return err == nil && ts.Messages == uint64(total)
			}, 10*time.Second, time.Millisecond, "recorder did not journal burst %d", i)
		}
	}
	require.NoError(t, pub.Close())
	var ts recorder.TapStats
	require.Eventually(t, func() bool {
		var jerr error
		ts, jerr = rec.Stats()
		return jerr == nil && ts.Ended == 1
	}, 10*time.Second, 10*time.Millisecond, "recorder did not journal the feed")
	require.EqualValues(t, total, ts.Messages)
	require.NoError(t, rec.Close())

	var events []Event
	for _, p := range sent.pkts {
		events = append(events, Event{Packet: p})
	}
	events = append(events, Event{Packet: wire.AppendEndOfSession(nil, pub.Session(), pub.NextSeq())})
	want := eventView(t, events)
	multi := 0
	for _, p := range sent.pkts {
		if pp, _ := wire.ParsePacket(p); pp.Count > 1 {
			multi++
		}
	}
	require.Greater(t, multi, 100, "the feed must carry packets of several messages")

	streams := j.Streams()
	require.Len(t, streams, 1)
	var buf bytes.Buffer
	w, err := NewWriter(&buf)
	require.NoError(t, err)
	xs, err := Export(w, j, streams[0].ID, ExportConfig{Group: feed})
	require.NoError(t, err)
	require.EqualValues(t, len(sent.pkts)+1, xs.Packets, "one exported packet per packet sent, and the end of session")
	evs, _ := readAll(t, buf.Bytes(), Config{})
	require.Equal(t, want, eventView(t, evs))
	t.Logf("%d messages in %d packets (%d of several messages) sent; exported %d packets", total, len(sent.pkts), multi, xs.Packets)

	file := filepath.Join(t.TempDir(), "live.pcap")
	require.NoError(t, os.WriteFile(file, buf.Bytes(), 0o600))
	require.Equal(t, want, tsharkDecode(t, file, feed.Port()))
}
