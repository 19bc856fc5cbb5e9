package fetch_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mdbus/mdbus/fetch"
	"github.com/mdbus/mdbus/internal/labtest"
	"github.com/mdbus/mdbus/internal/netlab"
	"github.com/mdbus/mdbus/journal"
	"github.com/mdbus/mdbus/retransmit"
	"github.com/mdbus/mdbus/wire"
)

func TestMain(m *testing.M) { labtest.Main(m) }

var session = func() wire.Session { s, _ := wire.ParseSession("FETCH1"); return s }()

func msg(seq wire.Seq) []byte {
	return []byte(fmt.Sprintf("message %d %s", seq, bytes.Repeat([]byte{'x'}, int(seq%50))))
}

// serveJournal writes n messages to a journal and serves it with a
// retransmit.Server (as "mdbus rewind --journal" does) on loopback.
func serveJournal(t *testing.T, n int) (*journal.Journal, *retransmit.Server) {
	j, err := journal.Open(t.TempDir(), journal.Config{Sync: journal.SyncNone})
	require.NoError(t, err)
	t.Cleanup(func() { j.Close() })
	w, err := j.Create(session, netip.MustParseAddrPort("127.0.0.1:9"), 1)
	require.NoError(t, err)
	for seq := wire.Seq(1); seq <= wire.Seq(n); seq++ {
		require.NoError(t, w.Append(seq, int64(seq), msg(seq)))
	}
	require.NoError(t, w.Close())
	srv, err := retransmit.NewServer(retransmit.ServerConfig{
		Listen:  netip.MustParseAddrPort("127.0.0.1:0"),
		Sources: []retransmit.Source{j},
	})
	require.NoError(t, err)
	t.Cleanup(func() { srv.Close() })
	return j, srv
}

func TestRange(t *testing.T) {
	netlab.Require(t)
	_, srv := serveJournal(t, 5000)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got, err := fetch.Range(ctx, fetch.Config{Server: srv.Addr(), Session: session}, 17, 4321)
	require.NoError(t, err)
	require.Len(t, got, 4321-17)
	for i, m := range got {
		require.Equal(t, msg(wire.Seq(17+i)), m)
	}
	// Beyond what the server holds: incomplete, bounded, named.
	_, err = fetch.Range(ctx, fetch.Config{Server: srv.Addr(), Session: session, Wait: 20 * time.Millisecond, Tries: 3}, 4990, 5010)
	require.ErrorIs(t, err, fetch.ErrIncomplete)
	require.Contains(t, err.Error(), "9 of [4990, 5010) missing from")
}

// TestRepairFromServer is acceptance 2 at the package level: a journal
// with a flipped byte fails verification naming file and offset, and
// Repair restores it from a running server of an intact copy.
func TestRepairFromServer(t *testing.T) {
	netlab.Require(t)
	_, srv := serveJournal(t, 20000)
	dir := t.TempDir()
	j, err := journal.Open(dir, journal.Config{Sync: journal.SyncNone, SegmentBytes: journal.MinSegmentBytes})
	require.NoError(t, err)
	w, err := j.Create(session, netip.MustParseAddrPort("127.0.0.1:9"), 1)
	require.NoError(t, err)
	for seq := wire.Seq(1); seq <= 20000; seq++ {
		require.NoError(t, w.Append(seq, int64(seq), msg(seq)))
	}
	require.NoError(t, w.Close())
	id := w.ID()
	segs, err := j.Segments(id)
	require.NoError(t, err)
	require.NoError(t, j.Close())
	b, err := os.ReadFile(segs[0].Path)
	require.NoError(t, err)
	b[5000] ^= 0xFF
	require.NoError(t, os.WriteFile(segs[0].Path, b, 0o644))

	j, err = journal.Open(dir, journal.Config{})
	require.NoError(t, err)
	defer j.Close()
	bad, err := j.Verify(id)
	require.NoError(t, err)
	require.Len(t, bad, 1)
	require.Equal(t, segs[0].Path, bad[0].Path)
	require.True(t, errors.Is(bad[0], journal.ErrCorrupt))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	filled, err := j.Repair(id, func(r journal.Range) ([][]byte, error) {
		return fetch.Range(ctx, fetch.Config{Server: srv.Addr(), Session: session}, r.From, r.To)
	})
	require.NoError(t, err)
	require.Len(t, filled, 1)
	bad, err = j.Verify(id)
	require.NoError(t, err)
	require.Empty(t, bad)
	r, err := j.OpenReader(id)
	require.NoError(t, err)
	defer r.Close()
	for seq := wire.Seq(1); seq <= 20000; seq++ {
		rec, err := r.Next()
		require.NoError(t, err)
		if rec.Seq != seq || !bytes.Equal(rec.Data, msg(seq)) {
			t.Fatalf("record %d wrong after repair", seq)
		}
	}
}

// TestStreamAnswerShapes: Stream hands over every message once, in order,
// whether the server answers each request with one packet (the default)
// or with many, and with one packet per answer it needs about one
// request per packet, not one per Idle wait.
func TestStreamAnswerShapes(t *testing.T) {
	netlab.Require(t)
	j, _ := serveJournal(t, 3000)
	for _, tc := range []struct {
		name     string
		maxBytes int // 0: one packet per answer
	}{{"one packet", 0}, {"many packets", 1 << 20}} {
		t.Run(tc.name, func(t *testing.T) {
			srv, err := retransmit.NewServer(retransmit.ServerConfig{
				Listen:          netip.MustParseAddrPort("127.0.0.1:0"),
				Sources:         []retransmit.Source{j},
				MaxRequestBytes: tc.maxBytes,
			})
			require.NoError(t, err)
			defer srv.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			want := wire.Seq(5)
			// A long Idle makes waiting for the rest of each answer
			// visible: one-packet answers must not pay it per packet.
			cfg := fetch.Config{Server: srv.Addr(), Session: session, Idle: 200 * time.Millisecond}
			start := time.Now()
			next, err := fetch.Stream(ctx, cfg, 5, 2900, func(seq wire.Seq, m []byte) error {
				if seq != want {
					return fmt.Errorf("got %d, want %d", seq, want)
				}
				if !bytes.Equal(m, msg(seq)) {
					return fmt.Errorf("message %d differs", seq)
				}
				want++
				return nil
			})
			require.NoError(t, err)
			require.Equal(t, wire.Seq(2900), next)
			require.Equal(t, wire.Seq(2900), want)
			st := srv.Stats()
			t.Logf("%s: %d requests, %d packets, %v", tc.name, st.Requests, st.UnicastPackets, time.Since(start))
			// Adaptive mode: at most one Idle wait (the first answer)
			// plus one per Wait timeout; 2,895 messages in ~60-byte
			// messages are ~120 packets, far more than 10 Idle waits.
			require.Less(t, time.Since(start), 10*cfg.Idle)
		})
	}
}
