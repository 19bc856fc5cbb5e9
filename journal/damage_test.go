//go:build unix

package journal

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mdbus/mdbus/wire"
)

// damagedJournal writes one stream of 12,000 messages in five segments,
// closed, and returns the journal and stream directories and the segment
// paths, oldest first.
func damagedJournal(t *testing.T, cfg Config) (dir, sdir string, segs []string) {
	t.Helper()
	dir = t.TempDir()
	cfg.Sync, cfg.SegmentBytes = SyncNone, MinSegmentBytes
	j := openJ(t, dir, cfg)
	infos, err := j.Segments(closedStream(t, j, 4, 12_000))
	require.NoError(t, err)
	for _, s := range infos {
		segs = append(segs, s.Path)
	}
	if cfg.RetainBytes == 0 {
		require.GreaterOrEqual(t, len(segs), 4)
	}
	require.NoError(t, j.Close())
	return dir, filepath.Dir(segs[0]), segs
}

// problems opens dir read-only, as mdbus journal verify does, and lists
// every damage and corruption it reports. It fails the test if Open
// blocks.
func problems(t *testing.T, dir string) []string {
	t.Helper()
	type result struct {
		out []string
		err error
	}
	done := make(chan result, 1)
	go func() {
		j, err := Open(dir, Config{ReadOnly: true})
		if err != nil {
			done <- result{err: err}
			return
		}
		defer j.Close()
		var out []string
		for _, d := range j.Damage() {
			out = append(out, "damage: "+d.String())
		}
		for _, in := range j.Streams() {
			bad, err := j.Verify(in.ID)
			if err != nil {
				out = append(out, "verify: "+err.Error())
			}
			for _, ce := range bad {
				out = append(out, "corrupt: "+ce.Error())
			}
		}
		done <- result{out: out}
	}()
	select {
	case r := <-done:
		require.NoError(t, r.err)
		return r.out
	case <-time.After(10 * time.Second):
		t.Fatal("a read-only open and verify of the journal blocked")
		return nil
	}
}

func TestVerifyLayoutDamage(t *testing.T) {
	dir, _, _ := damagedJournal(t, Config{})
	require.Empty(t, problems(t, dir), "an intact journal")

	cases := []struct {
		name   string
		damage func(t *testing.T, dir, sdir string, segs []string)
		want   string
	}{
		{"emptied middle segment", func(t *testing.T, dir, sdir string, segs []string) {
			require.NoError(t, os.Truncate(segs[1], 0))
		}, "shorter than its 72-byte header"},
		{"emptied newest segment", func(t *testing.T, dir, sdir string, segs []string) {
			require.NoError(t, os.Truncate(segs[len(segs)-1], 0))
		}, "the segment after it is missing"},
		{"deleted oldest segment", func(t *testing.T, dir, sdir string, segs []string) {
			require.NoError(t, os.Remove(segs[0]))
		}, "the segments before sequence"},
		{"deleted middle segment", func(t *testing.T, dir, sdir string, segs []string) {
			require.NoError(t, os.Remove(segs[2]))
		}, "but the stream continues at"},
		{"deleted newest segment", func(t *testing.T, dir, sdir string, segs []string) {
			require.NoError(t, os.Remove(segs[len(segs)-1]))
		}, "the segment after it is missing"},
		{"segment replaced by a symbolic link", func(t *testing.T, dir, sdir string, segs []string) {
			copyTo := filepath.Join(t.TempDir(), "copy")
			b, err := os.ReadFile(segs[1])
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(copyTo, b, 0o600))
			require.NoError(t, os.Remove(segs[1]))
			require.NoError(t, os.Symlink(copyTo, segs[1]))
		}, "symbolic link in place of a segment"},
		{"segment replaced by a FIFO", func(t *testing.T, dir, sdir string, segs []string) {
			require.NoError(t, os.Remove(segs[1]))
			require.NoError(t, syscall.Mkfifo(segs[1], 0o600))
		}, "FIFO (named pipe) in place of a segment"},
		{"segment renamed to another first sequence", func(t *testing.T, dir, sdir string, segs []string) {
			first, ext, ok := parseSegName(filepath.Base(segs[1]))
			require.True(t, ok)
			require.NoError(t, os.Rename(segs[1], filepath.Join(sdir, segName(first+5, ext))))
		}, "header names first sequence"},
		{"segment renamed to no sequence", func(t *testing.T, dir, sdir string, segs []string) {
			require.NoError(t, os.Rename(segs[1], filepath.Join(sdir, "old.seg")))
		}, "not a segment name"},
		{"stream directory renamed", func(t *testing.T, dir, sdir string, segs []string) {
			require.NoError(t, os.Rename(sdir, filepath.Join(dir, "stream-backup")))
		}, "not a stream's"},
		{"stream directory replaced by a symbolic link", func(t *testing.T, dir, sdir string, segs []string) {
			elsewhere := filepath.Join(t.TempDir(), "moved")
			require.NoError(t, os.Rename(sdir, elsewhere))
			require.NoError(t, os.Symlink(elsewhere, sdir))
		}, "symbolic link in the journal directory"},
		{"stream directory emptied", func(t *testing.T, dir, sdir string, segs []string) {
			for _, s := range segs {
				require.NoError(t, os.Remove(s))
			}
		}, "holds no readable segment"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir, sdir, segs := damagedJournal(t, Config{})
			c.damage(t, dir, sdir, segs)
			got := problems(t, dir)
			require.NotEmpty(t, got)
			require.Contains(t, strings.Join(got, "\n"), c.want)
		})
	}
}

// TestReadersRefuseNonRegular: a FIFO or a link in place of a segment
// makes a read-write Open fail at once, naming it, and never blocks.
func TestReadersRefuseNonRegular(t *testing.T) {
	for _, kind := range []string{"fifo", "symlink"} {
		t.Run(kind, func(t *testing.T) {
			dir, _, segs := damagedJournal(t, Config{})
			require.NoError(t, os.Remove(segs[1]))
			if kind == "fifo" {
				require.NoError(t, syscall.Mkfifo(segs[1], 0o600))
			} else {
				require.NoError(t, os.Symlink(segs[0], segs[1]))
			}
			done := make(chan error, 1)
			go func() {
				j, err := Open(dir, Config{})
				if err == nil {
					j.Close()
				}
				done <- err
			}()
			select {
			case err := <-done:
				require.ErrorIs(t, err, ErrNotRegular)
				require.Contains(t, err.Error(), segs[1])
			case <-time.After(10 * time.Second):
				t.Fatal("Open blocked")
			}
			// Reading from a read-only open stops at the missing range.
			j := openJ(t, dir, Config{ReadOnly: true})
			defer j.Close()
			r, err := j.OpenReader(j.Streams()[0].ID)
			require.NoError(t, err)
			defer r.Close()
			for {
				_, err = r.Next()
				if err != nil {
					break
				}
			}
			require.True(t, IsCorrupt(err), "got %v", err)
		})
	}
}

// TestRetentionIsNotDamage: segments removed by retention are not
// reported missing.
func TestRetentionIsNotDamage(t *testing.T) {
	dir, _, _ := damagedJournal(t, Config{RetainBytes: 2 * MinSegmentBytes})
	j := openJ(t, dir, Config{ReadOnly: true})
	require.Greater(t, j.Streams()[0].First, wire.Seq(1))
	require.NoError(t, j.Close())
	require.Empty(t, problems(t, dir))
}

// TestFormat1Journal: a journal written before format 2 (no seal records,
// no origin flags, no packet marks) opens without damage and reads whole.
func TestFormat1Journal(t *testing.T) {
	dir := t.TempDir()
	id := StreamID{Session: testSession, Source: testSource, Incarnation: 1}
	sdir := filepath.Join(dir, streamDirName(id))
	require.NoError(t, os.Mkdir(sdir, 0o700))
	var buf []byte
	for _, r := range []struct{ first, next wire.Seq }{{1, 101}, {101, 151}} {
		b := segHeader{version: 1, id: id, first: r.first, created: 1}.append(nil)
		for seq := r.first; seq < r.next; seq++ {
			buf = msgFor(buf, 9, seq)
			b = appendMessage(b, seq, tsFor(seq), buf, PacketUnknown)
		}
		require.NoError(t, os.WriteFile(filepath.Join(sdir, segName(r.first, segExt)), b, 0o600))
	}
	require.Empty(t, problems(t, dir))
	j := openJ(t, dir, Config{})
	checkStream(t, j, id, 9, 1, 151)
	// Appends to the format-1 segment and the rotation after it.
	w, err := j.Resume(id)
	require.NoError(t, err)
	appendN(t, w, 9, 10)
	require.NoError(t, w.Close())
	require.NoError(t, j.Close())
	require.Empty(t, problems(t, dir))
}
