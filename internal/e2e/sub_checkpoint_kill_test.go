//go:build linux

package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mdbus/mdbus/internal/netlab"
	"github.com/stretchr/testify/require"
)

// Acceptance: "mdbus sub --checkpoint" without --out prints
// to stdout and promises at-least-once. Killed with SIGKILL 10 times during
// a 1,000,000-message feed whose every subscriber loses 2% of what it
// receives, and restarted each time from its checkpoint, the concatenated
// stdout of all runs holds every sequence at least once: the checkpoint
// never records a sequence whose line is still in the process's buffer.
func TestAcceptanceSubCheckpointKill(t *testing.T) {
	netlab.Require(t)
	n := scale(1_000_000, 100_000)
	rate := float64(scale(100_000, 20_000))
	const kills = 10
	bin := buildMdbus(t)
	group := netip.MustParseAddrPort("239.192.26.2:32071")
	pub, srv := killFeed(t, group, "SUBKILL", rate)

	dir := t.TempDir()
	ckpt := filepath.Join(dir, "ckpt")
	var outs []string
	start := func(run int) (*exec.Cmd, string) {
		out := filepath.Join(dir, fmt.Sprintf("stdout-%02d", run))
		logPath := filepath.Join(dir, fmt.Sprintf("stderr-%02d", run))
		stdout, err := os.Create(out)
		require.NoError(t, err)
		defer stdout.Close()
		stderr, err := os.Create(logPath)
		require.NoError(t, err)
		defer stderr.Close()
		cmd := exec.Command(bin, "--counters=false", "sub", "--group", group.String(), "--retransmit", srv.Addr().String(),
			"--checkpoint", ckpt, "--start", "session", "--exit-on-end",
			"--loss", "0.02", "--impair-seed", strconv.Itoa(run+1))
		cmd.Stdout, cmd.Stderr = stdout, stderr
		require.NoError(t, cmd.Start())
		outs = append(outs, out)
		return cmd, logPath
	}

	const seed = 89
	var count atomic.Int64 // messages published so far
	published := publishSynth(pub, seed, n, &count)
	// afterSave returns right after the checkpoint file is next replaced
	// (each save renames a new file into place), or after 300 ms: a kill
	// then finds the lines of the sequences just saved wherever the
	// process left them, the worst moment for at-least-once.
	afterSave := func() {
		prev, _ := os.Stat(ckpt)
		poll(300*time.Millisecond, func() bool {
			fi, err := os.Stat(ckpt)
			return err == nil && (prev == nil || !os.SameFile(prev, fi))
		})
	}
	// Kill at seeded random points spread over the feed, measured in
	// messages published, so a slow host moves the moments but not where
	// in the feed they fall.
	rng := rand.New(rand.NewPCG(seed, 8))
	span := time.Duration(float64(n) / rate * float64(time.Second))
	for k := range kills {
		cmd, _ := start(k)
		at := min(int64(n), count.Load()+int64(n/(kills+2)/2)+rng.Int64N(int64(n/(kills+2))))
		waitFor(t, 3*span+60*time.Second, func() bool { return count.Load() >= at })
		afterSave()
		require.NoError(t, cmd.Process.Kill()) // SIGKILL: nothing is flushed or saved on the way out
		_ = cmd.Wait()
	}
	final, logPath := start(kills)
	// The final run has joined once it says where it starts.
	require.True(t, poll(30*time.Second, func() bool {
		b, _ := os.ReadFile(logPath)
		return bytes.Contains(b, []byte("mdbus sub: start"))
	}), "final run did not start")
	awaitPublished(t, published, 3*span+60*time.Second)
	require.NoError(t, pub.Close()) // end of session: the final run exits after it (--exit-on-end)
	err := awaitExit(t, final, 60*time.Second, "final run did not end at the end of session")
	b, _ := os.ReadFile(logPath)
	require.NoError(t, err, "final run: %s", b)

	// Every sequence 1..n is in some run's stdout ("SUBKILL SEQ HEX" lines;
	// a run killed mid-line leaves a torn last line, which is ignored).
	seen := make([]bool, n+1)
	lines := 0
	for _, out := range outs {
		f, err := os.Open(out)
		require.NoError(t, err)
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<16), 1<<20)
		for sc.Scan() {
			fs := bytes.Fields(sc.Bytes())
			if len(fs) < 3 || string(fs[0]) != "SUBKILL" {
				continue
			}
			seq, err := strconv.Atoi(string(fs[1]))
			if err == nil && seq >= 1 && seq <= n {
				seen[seq] = true
				lines++
			}
		}
		require.NoError(t, sc.Err())
		f.Close()
	}
	var missing []int
	for s := 1; s <= n; s++ {
		if !seen[s] {
			missing = append(missing, s)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("%d of %d sequences missing from the concatenated stdout of %d runs (first %d, last %d)",
			len(missing), n, kills+1, missing[0], missing[len(missing)-1])
	}
	t.Logf("every one of %d sequences printed across %d SIGKILLs (%d lines, %d printed again after a restart); retransmitter answered %d requests",
		n, kills, lines, lines-n, srv.Stats().Answered)
}
