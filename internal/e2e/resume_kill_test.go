package e2e

import (
	"bytes"
	"encoding/binary"
	"fmt"
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
	"github.com/mdbus/mdbus/internal/verify"
	"github.com/mdbus/mdbus/resume"
	"github.com/mdbus/mdbus/subscriber"
	"github.com/mdbus/mdbus/wire"
	"github.com/stretchr/testify/require"
)

// envChildConsumer carries "group|retransmitter|checkpoint|output" to the
// consumer process of TestAcceptanceResumeKill.
const envChildConsumer = "MDBUS_E2E_CHILD_CONSUMER"

// TestChildConsumer is not a test: it is the consumer process that
// TestAcceptanceResumeKill starts and kills. It resumes from its
// checkpoint, appends each delivered message to its output (sequence,
// length, bytes) in step with the checkpoint, and exits at the end of
// session (at most 120 s).
func TestChildConsumer(t *testing.T) {
	f := childFields(t, envChildConsumer, 4, "TestAcceptanceResumeKill")
	cp, err := resume.OpenCheckpoint(f[2], resume.CheckpointConfig{})
	require.NoError(t, err)
	fi, _ := os.Stat(f[3])
	out, err := resume.OpenOutput(f[3], cp)
	require.NoError(t, err)
	sess, _ := wire.ParseSession("RESUMEKILL")
	_, next, _ := cp.Position(sess)
	var size int64
	if fi != nil {
		size = fi.Size()
	}
	fmt.Fprintf(os.Stderr, "child consumer %d: resumes at sequence %d, output %d bytes cut to %x\n", os.Getpid(), next, size, cp.Token())
	w := out.Writer()
	ended := make(chan struct{})
	var rec []byte
	c, err := resume.New(resume.Config{
		Feed:       subscriber.Config{Group: netip.MustParseAddrPort(f[0]), Recovery: subscriber.Recovery{Retransmitter: netip.MustParseAddrPort(f[1])}, Receive: subscriber.Receive{ReorderPackets: 8192}},
		Checkpoint: cp,
		Start:      resume.Start{Kind: resume.StartSession},
		OnMessage: func(m subscriber.Message) {
			rec = binary.BigEndian.AppendUint64(rec[:0], uint64(m.Seq))
			rec = binary.BigEndian.AppendUint16(rec, uint16(len(m.Data)))
			w.Write(append(rec, m.Data...))
		},
		OnEnd: func(subscriber.StreamID, wire.Seq) { close(ended) },
	})
	require.NoError(t, err)
	// Joined: tell the parent (the end of session is sent once, so the
	// parent must not end the session before the last consumer listens).
	require.NoError(t, os.WriteFile(f[3]+".ready", nil, 0o644))
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	deadline := time.After(120 * time.Second)
wait:
	for {
		select {
		case <-ended:
			break wait
		case <-tick.C:
			fs := c.FeedStats()
			fmt.Fprintf(os.Stderr, "child consumer %d: %+v; feed msgs %d lost %d streams %d\n", os.Getpid(), c.Stats(), fs.Messages, fs.LostMessages, fs.Streams)
		case <-deadline:
			t.Error("no end of session within 120 s")
			break wait
		}
	}
	require.NoError(t, c.Close())
	st := c.Stats()
	fmt.Fprintf(os.Stderr, "child consumer: %+v\n", st)
	require.NoError(t, out.Close())
	require.NoError(t, cp.Close())
}

// Acceptance: a consumer killed with SIGKILL and restarted 10
// times during a 1,000,000-message stream ends with exactly the sent
// stream: every sequence once, in order, byte-identical (hash).
func TestAcceptanceResumeKill(t *testing.T) {
	netlab.Require(t)
	n := scale(1_000_000, 100_000)
	rate := float64(scale(100_000, 20_000))
	const kills = 10
	group := netip.MustParseAddrPort("239.192.26.1:32070")
	pub, srv := killFeed(t, group, "RESUMEKILL", rate)

	dir := t.TempDir()
	env := envChildConsumer + "=" + strings.Join([]string{group.String(), srv.Addr().String(),
		filepath.Join(dir, "ckpt"), filepath.Join(dir, "out")}, "|")
	start := func() *exec.Cmd { return startChild(t, "TestChildConsumer", env) }

	const seed = 88
	var count atomic.Int64 // messages published so far
	published := publishSynth(pub, seed, n, &count)
	// Kill at seeded random points spread over the stream, measured in
	// messages published, so a slow host moves the moments but not where
	// in the stream they fall.
	rng := rand.New(rand.NewPCG(seed, 6))
	span := time.Duration(float64(n) / rate * float64(time.Second))
	for k := range kills {
		cmd := start()
		at := min(int64(n), count.Load()+int64(n/(kills+2)/2)+rng.Int64N(int64(n/(kills+2))))
		waitFor(t, 3*span+60*time.Second, func() bool { return count.Load() >= at })
		require.NoError(t, cmd.Process.Kill()) // SIGKILL: no checkpoint on the way out
		_ = cmd.Wait()
		t.Logf("kill %d at %v", k+1, time.Now().Format("15:04:05.000"))
	}
	final := startReady(t, "TestChildConsumer", env, filepath.Join(dir, "out.ready"))
	awaitPublished(t, published, 3*span+60*time.Second)
	t.Logf("published %d messages", n)
	require.NoError(t, pub.Close()) // end of session: the final consumer exits after it
	require.NoError(t, awaitExit(t, final, 30*time.Second, "final consumer did not finish"), "final consumer")

	// The output holds every sequence once, in order, byte-identical.
	b, err := os.ReadFile(filepath.Join(dir, "out"))
	require.NoError(t, err)
	want, got := verify.NewHash(), verify.NewHash()
	gen := synth.New(seed)
	var exp []byte
	next := uint64(1)
	for len(b) > 0 {
		require.GreaterOrEqual(t, len(b), 10, "torn record at the end of the output")
		seq, l := binary.BigEndian.Uint64(b), int(binary.BigEndian.Uint16(b[8:]))
		require.Equal(t, next, seq, "gap or duplicate")
		require.GreaterOrEqual(t, len(b), 10+l)
		exp = gen.Next(exp[:0])
		require.True(t, bytes.Equal(exp, b[10:10+l]), "message %d differs: want %x, got %x", seq, exp, b[10:10+l])
		want.Add(exp)
		got.Add(b[10 : 10+l])
		b = b[10+l:]
		next++
	}
	require.Equal(t, uint64(n), next-1, "messages in the output")
	require.Equal(t, want.Sum(), got.Sum())
	ss := srv.Stats()
	t.Logf("exactly %d messages across %d SIGKILLs, hash %x; retransmitter answered %d requests", n, kills, got.Sum(), ss.Answered)
}
