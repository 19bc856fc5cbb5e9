package counters

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func create(t testing.TB, cfg Config) *File {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	f, err := Create(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	return f
}

func byLabel(s Snapshot) map[string]Value {
	m := map[string]Value{}
	for _, v := range s.Values {
		m[v.Owner+"|"+v.Kind.Name()+"|"+v.Label] = v
	}
	return m
}

func TestWriteOpenRead(t *testing.T) {
	f := create(t, Config{Role: "sub", Slots: 8, Interval: -1, Args: []string{"mdbus", "sub", "--stats", "1s"}})
	a := f.Add(SubMessages, Free, "", "sub")
	b := f.Add(SubDropped, Free, "short-header", "sub")
	c := f.Add(KindCustom, Gauge, "queue_depth", "sub/S1@127.0.0.1:5")
	a.Set(42)
	b.Add(3)
	b.Add(4)
	c.Set(-5)
	r, err := Open(f.Path())
	require.NoError(t, err)
	defer r.Close()
	s, err := r.Snapshot()
	require.NoError(t, err)
	require.Equal(t, os.Getpid(), s.PID)
	require.Equal(t, "sub", s.Role)
	require.Equal(t, "mdbus sub --stats 1s", s.Cmdline)
	require.True(t, s.Consistent)
	require.Equal(t, 8, s.Slots)
	m := byLabel(s)
	require.Len(t, m, 3)
	require.Equal(t, int64(42), m["sub|subscriber_messages_total|"].Value)
	require.Equal(t, Counter, m["sub|subscriber_messages_total|"].Type)
	require.Equal(t, int64(7), m["sub|subscriber_dropped_total|short-header"].Value)
	require.Equal(t, int64(-5), m["sub/S1@127.0.0.1:5||queue_depth"].Value)
	require.Equal(t, Gauge, m["sub/S1@127.0.0.1:5||queue_depth"].Type)

	// Free and reuse: the slot comes back with the new description and a
	// zero value.
	f.Free(c)
	d := f.Add(StreamGaps, Free, "", "sub/S2@127.0.0.1:6")
	require.Equal(t, 2, d.idx)
	s, err = r.Snapshot()
	require.NoError(t, err)
	m = byLabel(s)
	require.Len(t, m, 3)
	require.Equal(t, int64(0), m["sub/S2@127.0.0.1:6|stream_gaps_total|"].Value)

	// Exhaustion: detached slots work, the header counts them.
	var extra []*Slot
	for range 6 {
		extra = append(extra, f.Add(SubGaps, Free, "", "x"))
	}
	require.False(t, extra[4].Detached())
	require.True(t, extra[5].Detached())
	extra[5].Set(9)
	require.Equal(t, int64(9), extra[5].Value())
	s, err = r.Snapshot()
	require.NoError(t, err)
	require.Equal(t, uint64(1), s.Exhausted)
	require.Len(t, s.Values, 8)

	require.NoError(t, f.Close())
	require.NoError(t, f.Close())
	_, err = os.Stat(f.Path())
	require.True(t, errors.Is(err, os.ErrNotExist), "Close removes the file")
	a.Set(1) // a slot kept after Close stays harmless
}

func TestSetAllocs(t *testing.T) {
	f := create(t, Config{Interval: -1})
	s := f.Add(PubMessages, Free, "", "pub")
	n := testing.AllocsPerRun(1000, func() {
		s.Set(7)
		s.Add(1)
	})
	require.Zero(t, n)
}

func TestSamplerAndSnapshotConsistent(t *testing.T) {
	// The sampler writes the pass number into every slot; a reader in
	// another mapping sees every value of one pass whenever it says
	// Consistent, and it is consistent most of the time.
	f := create(t, Config{Role: "pub", Slots: 64, Interval: 200 * time.Microsecond})
	var slots []*Slot
	for i := range 64 {
		slots = append(slots, f.Add(KindCustom, Counter, "v", "o"+string(rune('a'+i%26))+string(rune('a'+i/26))))
	}
	var pass int64
	f.Sample(func(time.Time) {
		pass++
		for _, s := range slots {
			s.Set(pass)
		}
	})
	r, err := Open(f.Path())
	require.NoError(t, err)
	defer r.Close()
	consistent := 0
	deadline := time.Now().Add(3 * time.Second)
	for i := 0; i < 2000 && time.Now().Before(deadline); i++ {
		s, err := r.Snapshot()
		require.NoError(t, err)
		require.Len(t, s.Values, 64)
		if !s.Consistent {
			continue
		}
		consistent++
		for _, v := range s.Values {
			require.Equal(t, s.Values[0].Value, v.Value, "values of one pass")
		}
	}
	require.Greater(t, consistent, 0)
}

func TestStale(t *testing.T) {
	dir := t.TempDir()
	live := create(t, Config{Dir: dir, Role: "pub", Interval: -1})
	// A dead process's file: a child that has exited.
	cmd := exec.Command("true")
	require.NoError(t, cmd.Run())
	dead := create(t, Config{Dir: dir, Role: "sub", Interval: -1})
	deadPath := filepath.Join(dir, "sub-1.ctr")
	le.PutUint64(dead.mem[offPID:], uint64(cmd.Process.Pid))
	require.NoError(t, os.Rename(dead.Path(), deadPath))
	// Our own pid with another start time: a reused pid.
	reused := create(t, Config{Dir: dir, Role: "rewind", Interval: -1})
	le.PutUint64(reused.mem[offStartTicks:], le.Uint64(reused.mem[offStartTicks:])+1)
	// Not a counters file.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "junk.ctr"), []byte("hello"), 0o644))

	es, err := Scan(dir)
	require.NoError(t, err)
	got := map[string]State{}
	for _, e := range es {
		got[filepath.Base(e.Path)] = e.State
	}
	require.Equal(t, map[string]State{
		filepath.Base(live.Path()): Live, "sub-1.ctr": Stale,
		filepath.Base(reused.Path()): Stale, "junk.ctr": Invalid,
	}, got)
	removed, err := Clean(dir)
	require.NoError(t, err)
	require.Len(t, removed, 2)
	es, err = Scan(dir)
	require.NoError(t, err)
	require.Len(t, es, 2)
}

func TestUnreadable(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads every file")
	}
	dir := t.TempDir()
	f := create(t, Config{Dir: dir, Interval: -1})
	require.NoError(t, os.Chmod(f.Path(), 0))
	es, err := Scan(dir)
	require.NoError(t, err)
	require.Len(t, es, 1)
	require.Equal(t, Unreadable, es[0].State)
	require.ErrorIs(t, es[0].Err, os.ErrPermission)
}

func TestStartTicks(t *testing.T) {
	a, err := StartTicks(os.Getpid())
	require.NoError(t, err)
	require.NotZero(t, a)
	require.True(t, Alive(os.Getpid(), a))
	require.False(t, Alive(os.Getpid(), a+1))
	require.False(t, Alive(1<<22+1, 0))
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []Config{{Slots: -1}, {Slots: MaxSlots + 1}, {Role: "a/b"}, {Role: "a\x00"}, {Role: strings.Repeat("r", 33)}} {
		_, err := Create(c)
		require.Error(t, err, "%+v", c)
	}
	_, err := Create(Config{Dir: "/proc/nonexistent/x"})
	require.ErrorContains(t, err, "--counters-dir")
}

func TestSharedDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "shm", "mdbus")
	create(t, Config{Dir: dir, Interval: -1})
	fi, err := os.Stat(dir)
	require.NoError(t, err)
	require.Equal(t, os.ModeDir|os.ModeSticky|0o777, fi.Mode(), "any user may add a file, none remove another's")
}

func TestOff(t *testing.T) {
	f := create(t, Config{Off: true, Interval: -1})
	require.Empty(t, f.Path())
	f.Add(PubPackets, Free, "", "pub").Set(5)
	s := f.Snapshot()
	require.Len(t, s.Values, 1)
	require.Equal(t, int64(5), s.Values[0].Value)
}

func TestSnake(t *testing.T) {
	for in, want := range map[string]string{"KernelDrops": "kernel_drops", "NAKs": "naks", "Messages": "messages",
		"NAKErrors": "nak_errors", "RecoveryP50": "recovery_p50", "ID": "id"} {
		require.Equal(t, want, snake(in), in)
	}
}

func TestAttachStruct(t *testing.T) {
	f := create(t, Config{Interval: -1})
	type inner struct{ Sent uint64 }
	st := struct {
		Messages uint64
		Depth    int
		Wait     time.Duration
		Inner    inner
		name     string
	}{7, -2, time.Millisecond, inner{3}, "x"}
	var mu sync.Mutex
	AttachStruct(f, "record", func() any { mu.Lock(); defer mu.Unlock(); return st })
	f.SampleNow()
	m := byLabel(f.Snapshot())
	require.Equal(t, int64(7), m["record||messages"].Value)
	require.Equal(t, Counter, m["record||messages"].Type)
	require.Equal(t, int64(-2), m["record||depth"].Value)
	require.Equal(t, int64(time.Millisecond), m["record||wait_ns"].Value)
	require.Equal(t, int64(3), m["record||inner_sent"].Value)
	var b bytes.Buffer
	require.NoError(t, WritePrometheus(&b, f.Snapshot()))
	require.Contains(t, b.String(), `mdbus_mdbus_messages_total{role="mdbus",owner="record"} 7`)
	require.Contains(t, b.String(), `mdbus_mdbus_wait_seconds{role="mdbus",owner="record"} 0.001`)
	promtoolCheck(t, b.Bytes())
}

func TestNameParts(t *testing.T) {
	for name, want := range map[string]struct {
		role string
		pid  int
	}{"sub-12.ctr": {"sub", 12}, "statsd-relay-7.ctr": {"statsd-relay", 7}, "x.ctr": {}, "-3.ctr": {}, "a-b.ctr": {}, "a-0.ctr": {}} {
		r, p := nameParts(name)
		require.Equal(t, want.role, r, name)
		require.Equal(t, want.pid, p, name)
	}
}
