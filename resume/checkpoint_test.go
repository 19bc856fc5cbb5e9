package resume

import (
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mdbus/mdbus/wire"
	"github.com/stretchr/testify/require"
)

func sess(t testing.TB, s string) wire.Session {
	t.Helper()
	x, err := wire.ParseSession(s)
	require.NoError(t, err)
	return x
}

func TestCheckpointRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cp")
	cp, err := OpenCheckpoint(path, CheckpointConfig{Interval: time.Hour})
	require.NoError(t, err)
	src := netip.MustParseAddrPort("127.0.0.1:4000")
	a, b := sess(t, "A"), sess(t, "B B")
	require.NoError(t, cp.Delivered(a, src, 41))
	require.NoError(t, cp.Delivered(b, netip.AddrPort{}, 7))
	_, err = os.Stat(path)
	require.ErrorIs(t, err, os.ErrNotExist, "within Interval nothing is written")
	cp.SetFlush(func() ([]byte, error) { return []byte{1, 2, 3}, nil })
	require.NoError(t, cp.Close())

	cp2, err := OpenCheckpoint(path, CheckpointConfig{})
	require.NoError(t, err)
	s, next, ok := cp2.Position(a)
	require.True(t, ok)
	require.Equal(t, src, s)
	require.Equal(t, wire.Seq(42), next)
	s, next, ok = cp2.Position(b)
	require.True(t, ok)
	require.False(t, s.IsValid())
	require.Equal(t, wire.Seq(8), next)
	require.Equal(t, []byte{1, 2, 3}, cp2.Token())
	_, _, ok = cp2.Position(sess(t, "C"))
	require.False(t, ok)
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".cp.tmp*"))
	require.Empty(t, left, "no temporary file is left behind")
}

func TestCheckpointBoundedRate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cp")
	saves := 0
	cp, err := OpenCheckpoint(path, CheckpointConfig{Interval: 20 * time.Millisecond,
		Flush: func() ([]byte, error) { saves++; return nil, nil }})
	require.NoError(t, err)
	start := time.Now()
	for i := range 50_000 {
		require.NoError(t, cp.Delivered(sess(t, "A"), netip.AddrPort{}, wire.Seq(i+1)))
	}
	el := time.Since(start)
	require.LessOrEqual(t, saves, int(el/(20*time.Millisecond))+1, "at most one save per Interval")
}

func TestCheckpointBadFiles(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	cp, err := OpenCheckpoint(good, CheckpointConfig{})
	require.NoError(t, err)
	require.NoError(t, cp.Delivered(sess(t, "A"), netip.AddrPort{}, 5))
	require.NoError(t, cp.Close())
	b, err := os.ReadFile(good)
	require.NoError(t, err)
	for name, data := range map[string][]byte{
		"empty":     nil,
		"garbage":   []byte("hello\n"),
		"torn":      b[:len(b)-12],
		"flipped":   append(append([]byte{}, b[:len(b)-20]...), append([]byte{b[len(b)-20] ^ 1}, b[len(b)-19:]...)...),
		"truncated": b[:len(checkpointMagic)+3],
	} {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(dir, name)
			require.NoError(t, os.WriteFile(p, data, 0o644))
			_, err := OpenCheckpoint(p, CheckpointConfig{})
			require.ErrorIs(t, err, ErrCheckpoint)
		})
	}
}

func FuzzCheckpointDecode(f *testing.F) {
	dir := f.TempDir()
	p := filepath.Join(dir, "seed")
	cp, _ := OpenCheckpoint(p, CheckpointConfig{})
	cp.Delivered(sess(f, "ABC"), netip.MustParseAddrPort("[::1]:9"), 99)
	cp.Close()
	seed, _ := os.ReadFile(p)
	f.Add(seed)
	f.Add([]byte(checkpointMagic + "crc32c 00000000\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c := &Checkpoint{streams: map[wire.Session]position{}}
		if err := c.decode(b); err != nil {
			return
		}
		// A decoded checkpoint re-encodes to one that decodes the same.
		var buf = c.buf
		c.encode(&buf)
		c2 := &Checkpoint{streams: map[wire.Session]position{}}
		require.NoError(t, c2.decode(buf.Bytes()))
		require.Equal(t, c.streams, c2.streams)
		require.Equal(t, len(c.token), len(c2.token))
	})
}

func TestParseStart(t *testing.T) {
	for in, want := range map[string]Start{
		"": {}, "live": {}, "session": {Kind: StartSession}, "seq:42": {Kind: StartSeq, Seq: 42},
		"time:2026-11-30T14:30:00Z": {Kind: StartTime, Time: time.Date(2026, 11, 30, 14, 30, 0, 0, time.UTC).UnixNano()},
	} {
		got, err := ParseStart(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
		if in != "" {
			require.Equal(t, in, got.String())
		}
	}
	for _, bad := range []string{"seq:0", "seq:x", "time:yesterday", "beginning"} {
		_, err := ParseStart(bad)
		require.Error(t, err, bad)
	}
}

// A second Close returns ErrClosed (README "House conventions") and
// saves nothing more.
func TestCheckpointCloseTwice(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cp")
	saves := 0
	cp, err := OpenCheckpoint(path, CheckpointConfig{Interval: time.Hour,
		Flush: func() ([]byte, error) { saves++; return nil, nil }})
	require.NoError(t, err)
	require.NoError(t, cp.Delivered(sess(t, "A"), netip.AddrPort{}, 5))
	require.NoError(t, cp.Close())
	require.Equal(t, 1, saves)
	require.ErrorIs(t, cp.Close(), ErrClosed)
	require.Equal(t, 1, saves, "a second Close does not save again")
}
