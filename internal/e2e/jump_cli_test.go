//go:build linux

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mdbus/mdbus/internal/netlab"
)

// TestCaptureJumpCLI: shared/testdata's two-packet capture jumps 4.2M
// sequences between its packets. Sent live, the default subscriber says
// so (a warning line and suspect_jumps in its summary) instead of
// dropping the second packet silently; with --max-gap above the jump it
// delivers all 39 messages and reports the 4,244,620 it never saw as lost.
func TestCaptureJumpCLI(t *testing.T) {
	netlab.Require(t)
	capture := filepath.Join("..", "..", "..", "shared", "testdata", "nasdaq-itch50-multiple-packets.pcap")
	if _, err := os.Stat(capture); err != nil {
		t.Skipf("shared/testdata not beside the repository: %v", err)
	}
	bin := buildMdbus(t)
	run := func(t *testing.T, port string, subArgs ...string) (stdout, stderr string) {
		group := "239.192.42.1:" + port
		ctr := t.TempDir()
		sub := exec.Command(bin, append([]string{"--counters-dir", ctr, "sub", "--group", group, "--duration", "3s"}, subArgs...)...)
		var out, errb strings.Builder
		sub.Stdout, sub.Stderr = &out, &errb
		require.NoError(t, sub.Start())
		// The capture has no history to ask for, so the subscriber must
		// have joined before the import sends: it creates its counters
		// file once it has (cmd/mdbus/sub.go: subscriber.New, then the
		// counters).
		waitFor(t, 20*time.Second, func() bool { m, _ := filepath.Glob(filepath.Join(ctr, "*.ctr")); return len(m) == 1 })
		imp := exec.Command(bin, "pcap", "import", capture, "--group", group, "--max")
		b, err := imp.CombinedOutput()
		require.NoError(t, err, "%s", b)
		require.NoError(t, sub.Wait())
		return out.String(), errb.String()
	}
	t.Run("default", func(t *testing.T) {
		out, errs := run(t, "32410")
		require.Equal(t, 1, strings.Count(out, "\n"), "the message before the jump")
		require.Contains(t, errs, "jumped beyond the gap bound")
		require.Contains(t, errs, "--max-gap")
		require.Contains(t, errs, "suspect_jumps=1")
	})
	t.Run("max-gap", func(t *testing.T) {
		out, errs := run(t, "32412", "--max-gap", "10000000")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		require.Len(t, lines, 40, "39 messages and one loss line")
		require.Contains(t, out, "# LOST 000010059B [14764497, 19009117): 4244620 messages")
		require.Contains(t, errs, "messages=39")
		require.NotContains(t, errs, "jumped beyond")
	})
}
