package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mdbus/mdbus/internal/netlab"
	"github.com/mdbus/mdbus/internal/synth"
	"github.com/mdbus/mdbus/journal"
	"github.com/mdbus/mdbus/recorder"
	"github.com/mdbus/mdbus/wire"
	"github.com/stretchr/testify/require"
)

// envChildRecorder carries "group|upstream|journal dir" to the recorder
// process of TestAcceptanceRecorderCrash.
const envChildRecorder = "MDBUS_E2E_CHILD_RECORDER"

// TestChildRecorder is not a test: it is the recorder process that
// TestAcceptanceRecorderCrash starts and kills. It records the feed into
// the journal (fsync every 10 ms) until the end of session (at most 120 s).
func TestChildRecorder(t *testing.T) {
	f := childFields(t, envChildRecorder, 3, "TestAcceptanceRecorderCrash")
	j, err := journal.Open(f[2], journal.Config{Sync: journal.SyncInterval, SyncInterval: 10 * time.Millisecond})
	require.NoError(t, err)
	rec, err := recorder.NewRecorder(recorder.Config{Feed: netip.MustParseAddrPort(f[0]), Upstream: netip.MustParseAddrPort(f[1]), Journal: j,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(f[2]+".ready", nil, 0o644))
	poll(120*time.Second, func() bool { ts, _ := rec.Stats(); return ts.Ended > 0 })
	require.NoError(t, rec.Close())
	ts, jerr := rec.Stats()
	require.NoError(t, jerr)
	fmt.Fprintf(os.Stderr, "child recorder %d: %+v\n", os.Getpid(), ts)
	require.NoError(t, j.Close())
}

// Acceptance with the real recorder: a recorder journals a
// 1,000,000-message stream with fsync every 10 ms and is killed with SIGKILL
// at seeded random moments, 20 times. After each kill the journal reopens
// with every record byte-identical to what was sent (a torn tail is
// truncated); each restart continues the same incarnation at the next
// sequence (fetching what it missed while down from the publisher's
// retransmitter), so the final journal is one incarnation holding exactly
// the stream.
func TestAcceptanceRecorderCrash(t *testing.T) {
	netlab.Require(t)
	n := scale(1_000_000, 100_000)
	rate := float64(scale(50_000, 20_000))
	const kills = 20
	group := netip.MustParseAddrPort("239.192.29.1:32100")
	// The publisher sends nothing but heartbeats until the first
	// recorder is up (publishSynth below).
	pub, srv := killFeed(t, group, "CRASHREC", rate)
	dir := filepath.Join(t.TempDir(), "journal")
	ready := dir + ".ready"
	env := envChildRecorder + "=" + strings.Join([]string{group.String(), srv.Addr().String(), dir}, "|")
	start := func() *exec.Cmd { return startReady(t, "TestChildRecorder", env, ready) }

	const seed = 99
	var sent [][]byte
	gen := synth.New(seed)
	var buf []byte
	for range n {
		buf = gen.Next(buf[:0])
		sent = append(sent, bytes.Clone(buf))
	}
	// check reopens the journal and compares every record with what was
	// sent; it returns the newest incarnation's bounds.
	session, _ := wire.ParseSession("CRASHREC")
	check := func() (infos []journal.StreamInfo, torn int) {
		j, err := journal.Open(dir, journal.Config{})
		require.NoError(t, err)
		defer j.Close()
		for _, si := range j.Streams() {
			if si.ID.Session != session {
				continue
			}
			infos = append(infos, si)
			r, err := j.OpenReader(si.ID)
			require.NoError(t, err)
			for seq := si.First; ; seq++ {
				rec, err := r.Next()
				if errors.Is(err, io.EOF) {
					require.Equal(t, si.Next, seq)
					break
				}
				require.NoError(t, err)
				require.Equal(t, seq, rec.Seq)
				require.True(t, bytes.Equal(sent[seq-1], rec.Data), "record %d differs from what was sent", seq)
			}
			r.Close()
		}
		return infos, len(j.TornTails())
	}

	cmd := start()
	var count atomic.Int64                          // messages published so far
	published := publishSynth(pub, seed, n, &count) // sent, in order
	rng := rand.New(rand.NewPCG(seed, 20))
	span := time.Duration(float64(n) / rate * float64(time.Second))
	tornTotal := 0
	for k := range kills {
		// Kill at a random point of the stream, measured in messages, so
		// a slow host moves the moment but not where in the stream it falls.
		at := min(int64(len(sent)), count.Load()+rng.Int64N(int64(n/(kills+1))))
		waitFor(t, 3*span+60*time.Second, func() bool { return count.Load() >= at })
		require.NoError(t, cmd.Process.Kill())
		_ = cmd.Wait()
		infos, torn := check()
		tornTotal += torn
		require.Len(t, infos, 1, "one incarnation: each restart continued it")
		t.Logf("%s kill %d: journal holds [%d, %d), %d torn tail(s) truncated", time.Now().Format("05.000"), k+1, infos[0].First, infos[0].Next, torn)
		cmd = start()
	}
	awaitPublished(t, published, 3*span+60*time.Second)
	require.NoError(t, pub.Close()) // end of session: the last recorder exits after it
	require.NoError(t, awaitExit(t, cmd, 60*time.Second, "final recorder did not see the end of session"), "final recorder")
	infos, _ := check()
	require.Len(t, infos, 1)
	require.Equal(t, wire.Seq(1), infos[0].First)
	require.Equal(t, wire.Seq(n+1), infos[0].Next)
	require.True(t, infos[0].Ended)
	t.Logf("%d SIGKILLs: one incarnation holding all %d messages byte-identical, %d torn tails truncated on reopen", kills, n, tornTotal)
}
