package resume

import (
	"bytes"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mdbus/mdbus/wire"
	"github.com/stretchr/testify/require"
)

// TestOutputInStepWithCheckpoint: after a crash (no Close), reopening cuts
// the output back to exactly the last snapshot, also when the output's
// buffer wrote through on its own between snapshots (records larger than
// the buffer, many records between two snapshots).
func TestOutputInStepWithCheckpoint(t *testing.T) {
	dir := t.TempDir()
	cpPath, outPath := filepath.Join(dir, "cp"), filepath.Join(dir, "out")
	s := sess(t, "OUT")
	rec := func(i int) []byte { return bytes.Repeat([]byte{byte(i)}, 1000+i%300) }
	var want []byte
	next := 1
	for run := range 3 {
		cp, err := OpenCheckpoint(cpPath, CheckpointConfig{Interval: time.Hour})
		require.NoError(t, err)
		out, err := OpenOutput(outPath, cp)
		require.NoError(t, err)
		if _, n, ok := cp.Position(s); ok {
			next = int(n)
		}
		// 2000 records (about 2.3 MB, far beyond the 256 KiB buffer),
		// a snapshot after the first 1500, then a "crash".
		for i := next; i < next+2000; i++ {
			_, err := out.Writer().Write(rec(i))
			require.NoError(t, err)
			if i == next+1499 {
				require.NoError(t, cp.Delivered(s, netip.AddrPort{}, wire.Seq(i)))
				require.NoError(t, cp.Save())
			}
		}
		for i := next; i < next+1500; i++ {
			want = append(want, rec(i)...)
		}
		require.NoError(t, out.w.Flush()) // bytes past the snapshot reach the file, as before a SIGKILL
		require.NoError(t, out.f.Close())
		_ = run
	}
	cp, err := OpenCheckpoint(cpPath, CheckpointConfig{})
	require.NoError(t, err)
	out, err := OpenOutput(outPath, cp)
	require.NoError(t, err)
	require.NoError(t, out.Close())
	got, err := os.ReadFile(outPath)
	require.NoError(t, err)
	require.Equal(t, len(want), len(got))
	require.True(t, bytes.Equal(want, got))
}
