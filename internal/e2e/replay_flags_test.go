//go:build linux

package e2e

import (
	"bytes"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mdbus/mdbus/journal"
	"github.com/mdbus/mdbus/wire"
	"github.com/stretchr/testify/require"
)

// TestReplayCLIPaces (issue 19, acceptance 4 and 5): conflicting paces and
// --speed 0 are usage errors of one line; --loop N replays N passes and
// --loop alone until interrupted, with the session banner once per run;
// records that share a timestamp leave as one packet; --pps paces packets;
// the summary gives msgs/s, packets/s and Mbit/s.
func TestReplayCLIPaces(t *testing.T) {
	_, bin, _ := opsLab(t)
	// 50 packets of 4 messages, 1 ms apart.
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC).UnixNano()
	var recs []journal.Record
	for i := range 200 {
		recs = append(recs, journal.Record{Seq: wire.Seq(i + 1), Time: t0 + int64(i/4)*int64(time.Millisecond), Data: fmt.Appendf(nil, "message %03d", i)})
	}
	src := writeJournal(t, "PACES", recs, false)
	group := "239.192.31.1:32120"

	replay := func(args ...string) (int, string) {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"replay", "--journal", src, "--progress", "0"}, args...)...)
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), string(out)
		}
		require.NoError(t, err, "%s", out)
		return 0, string(out)
	}
	for _, args := range [][]string{
		{"--max", "--speed", "2", "--rate", "5"},
		{"--pps", "10", "--mbps", "1"},
		{"--speed", "0"},
		{"--group", group, "stray"},
	} {
		code, out := replay(args...)
		require.Equal(t, 2, code, "%v: %s", args, out)
		require.Equal(t, 1, strings.Count(strings.TrimSpace(out), "\n")+1, "one line: %q", out)
	}
	_, out := replay("--max", "--speed", "2", "--rate", "5")
	require.Contains(t, out, "give one pace, not --speed, --rate, --max")
	_, out = replay("--speed", "0")
	require.Contains(t, out, "--max")

	summary := regexp.MustCompile(`(\d+) messages in (\d+) packets .* in (\S+): (\d+) msgs/s, (\d+) packets/s, ([\d.]+) Mbit/s; (\d+) pass\(es\)`)
	banner := "mdbus replay: session PACES from sequence 1"

	code, out := replay("--group", group, "--loop", "3", "--max")
	require.Equal(t, 0, code, out)
	require.Equal(t, 1, strings.Count(out, banner), out)
	m := summary.FindStringSubmatch(out)
	require.NotNil(t, m, out)
	require.Equal(t, "600", m[1])
	require.Equal(t, "3", m[7])

	// --pps: the 50 packets, each its 4 messages in one datagram, at
	// 1000/s take 49 ms.
	code, out = replay("--group", group, "--pps", "1000")
	require.Equal(t, 0, code, out)
	m = summary.FindStringSubmatch(out)
	require.NotNil(t, m, out)
	require.Equal(t, []string{"200", "50"}, m[1:3])
	el, err := time.ParseDuration(m[3])
	require.NoError(t, err)
	t.Logf("--pps 1000: %s", strings.TrimSpace(m[0]))
	require.InDelta(t, 49*time.Millisecond, el, float64(20*time.Millisecond))

	// --loop alone: until interrupted, one banner.
	cmd := exec.Command(bin, "replay", "--journal", src, "--progress", "10ms", "--group", group, "--loop", "--max")
	var mu sync.Mutex
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = lockedWriter{&mu, &buf}, lockedWriter{&mu, &buf}
	require.NoError(t, cmd.Start())
	// The progress lines name the pass under way: the interrupt comes
	// once a second pass has begun.
	second := regexp.MustCompile(`, pass ([2-9]|\d{2,}),`)
	waitFor(t, 30*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return second.Match(buf.Bytes())
	})
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	require.NoError(t, cmd.Wait())
	out = buf.String()
	require.Equal(t, 1, strings.Count(out, banner), out)
	m = summary.FindStringSubmatch(out)
	require.NotNil(t, m, out)
	passes, _ := strconv.Atoi(m[7])
	require.Greater(t, passes, 1, out)
}
