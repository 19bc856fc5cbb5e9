package recorder

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"testing"
	"time"

	"github.com/mdbus/mdbus/internal/netlab"
	"github.com/mdbus/mdbus/journal"
	"github.com/mdbus/mdbus/publisher"
	"github.com/mdbus/mdbus/retransmit"
	"github.com/mdbus/mdbus/wire"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	if !assert.Eventually(t, cond, d, 5*time.Millisecond) {
		t.Fatalf("%s: not within %v", what, d)
	}
}

func readAll(t *testing.T, j *journal.Journal, id journal.StreamID) []journal.Record {
	r, err := j.OpenReader(id)
	require.NoError(t, err)
	defer r.Close()
	var out []journal.Record
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		out = append(out, journal.Record{Seq: rec.Seq, Time: rec.Time, Data: bytes.Clone(rec.Data)})
	}
}

// TestRecorderIncarnations: a session restarted by a new publisher (a new
// source port, sequences from 1 again) is a new journal incarnation; each
// end of session is recorded; every record is stamped with its receive
// time.
func TestRecorderIncarnations(t *testing.T) {
	netlab.Require(t)
	feed := netip.MustParseAddrPort("239.192.41.1:32411")
	j, err := journal.Open(t.TempDir(), journal.Config{})
	require.NoError(t, err)
	defer j.Close()
	rec, err := NewRecorder(Config{Feed: feed, Journal: j})
	require.NoError(t, err)
	before := time.Now().UnixNano()
	for run := range 2 {
		pub, err := publisher.New(publisher.Config{Group: feed, Session: "TWICE"})
		require.NoError(t, err)
		for i := range 100 {
			_, err := pub.Publish(fmt.Appendf(nil, "run %d msg %d", run, i+1))
			require.NoError(t, err)
		}
		require.NoError(t, pub.Close())
		waitFor(t, 5*time.Second, "end of session recorded", func() bool {
			ts, _ := rec.Stats()
			return ts.Ended == uint64(run+1)
		})
	}
	require.NoError(t, rec.Close())
	require.ErrorIs(t, rec.Close(), ErrClosed)
	after := time.Now().UnixNano()
	ts, jerr := rec.Stats()
	require.NoError(t, jerr)
	require.Equal(t, TapStats{Messages: 200, Bytes: ts.Bytes, Incarnations: 2, Ended: 2}, ts)

	streams := j.Streams()
	require.Len(t, streams, 2)
	for run, st := range streams {
		require.Equal(t, "TWICE     ", string(st.ID.Session[:]))
		require.Equal(t, wire.Seq(1), st.First)
		require.Equal(t, wire.Seq(101), st.Next)
		require.True(t, st.Ended)
		recs := readAll(t, j, st.ID)
		require.Len(t, recs, 100)
		for i, r := range recs {
			require.Equal(t, fmt.Sprintf("run %d msg %d", run, i+1), string(r.Data))
			require.GreaterOrEqual(t, r.Time, before)
			require.LessOrEqual(t, r.Time, after)
		}
	}
	require.NotEqual(t, streams[0].ID, streams[1].ID)
}

// TestRewinderServesFromJournal: with a Journal, the rewinder answers a
// range that fell out of its cache from disk.
func TestRewinderServesFromJournal(t *testing.T) {
	netlab.Require(t)
	feed := netip.MustParseAddrPort("239.192.41.2:32412")
	j, err := journal.Open(t.TempDir(), journal.Config{})
	require.NoError(t, err)
	defer j.Close()
	rw, err := NewRewinder(RewinderConfig{Feed: feed, Journal: j,
		Cache:  retransmit.CacheConfig{MaxMessages: 10},
		Server: retransmit.ServerConfig{Listen: netip.MustParseAddrPort("127.0.0.1:0")}})
	require.NoError(t, err)
	pub, err := publisher.New(publisher.Config{Group: feed, Session: "DEEP"})
	require.NoError(t, err)
	for i := range 500 {
		_, err := pub.Publish(fmt.Appendf(nil, "m%d", i+1))
		require.NoError(t, err)
	}
	session := pub.Session()
	waitFor(t, 5*time.Second, "journaled", func() bool {
		_, next, ok := j.Bounds(session)
		return ok && next == 501
	})
	first, _, _ := rw.Cache().Bounds(session)
	require.Greater(t, first, wire.Seq(400))
	// Ask the rewinder for [5, 25) over its re-request socket.
	pkt, from := askOnce(t, rw.Addr(), session, 5, 20)
	require.Equal(t, wire.Seq(5), from)
	it := pkt.Messages()
	n := 0
	for {
		m, seq, ok := it.Next()
		if !ok {
			break
		}
		require.Equal(t, fmt.Sprintf("m%d", seq), string(m))
		n++
	}
	require.Equal(t, 20, n)
	require.NoError(t, pub.Close())
	require.NoError(t, rw.Close())
	require.ErrorIs(t, rw.Close(), ErrClosed)
	js, jerr := rw.JournalStats()
	require.NoError(t, jerr)
	require.Equal(t, uint64(500), js.Messages)
}

func TestConfigErrors(t *testing.T) {
	_, err := NewRecorder(Config{})
	require.ErrorIs(t, err, ErrConfig)
	_, err = NewRecorder(Config{Feed: netip.MustParseAddrPort("239.1.1.1:1")})
	require.ErrorIs(t, err, ErrConfig)
	_, err = NewRewinder(RewinderConfig{})
	require.ErrorIs(t, err, ErrConfig)
}
