//go:build unix

package counters

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
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
	require.ErrorIs(t, f.Close(), ErrClosed, "a second Close")
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

// TestSamplesEveryInterval: the sampling goroutine runs the functions
// given to Sample once per Interval, with the time of the pass, until
// Close. In a testing/synctest bubble the passes fall exactly on the
// interval, and a goroutine Close left behind would fail the bubble.
func TestSamplesEveryInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const every = 10 * time.Millisecond
		f, err := Create(Config{Dir: t.TempDir(), Role: "pub", Interval: every})
		require.NoError(t, err)
		start := time.Now()
		var mu sync.Mutex
		var passes []time.Duration
		third := make(chan struct{})
		f.Sample(func(now time.Time) {
			mu.Lock()
			defer mu.Unlock()
			passes = append(passes, now.Sub(start))
			if len(passes) == 3 {
				close(third)
			}
		})
		<-third // the bubble's clock runs on while the sampler sleeps
		require.Equal(t, 3*every, time.Since(start), "the third pass at three intervals")
		synctest.Wait()
		mu.Lock()
		require.Equal(t, []time.Duration{every, 2 * every, 3 * every}, passes)
		mu.Unlock()
		require.NoError(t, f.Close())
	})
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

func TestPrivateDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "shm", "mdbus")
	f := create(t, Config{Dir: dir, Interval: -1})
	fi, err := os.Stat(dir)
	require.NoError(t, err)
	require.Equal(t, os.ModeDir|0o700, fi.Mode(), "only this user may list, add or replace files")
	fi, err = os.Stat(f.Path())
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode())

	// A directory others may write to (as /dev/shm/mdbus was, 1777) is
	// refused by writers and readers alike.
	shared := filepath.Join(t.TempDir(), "shared")
	require.NoError(t, os.Mkdir(shared, 0o755))
	require.NoError(t, os.Chmod(shared, 0o777|os.ModeSticky))
	_, err = Create(Config{Dir: shared, Interval: -1})
	require.ErrorIs(t, err, ErrNotPrivate)
	require.ErrorContains(t, err, "--counters-dir")
	_, err = Scan(shared)
	require.ErrorIs(t, err, ErrNotPrivate)

	// A link in place of the directory.
	link := filepath.Join(t.TempDir(), "link")
	require.NoError(t, os.Symlink(dir, link))
	_, err = Create(Config{Dir: link, Interval: -1})
	require.ErrorIs(t, err, ErrNotPrivate)
	_, err = Scan(link)
	require.ErrorIs(t, err, ErrNotPrivate)

	// A directory named for another user: someone made it first.
	other := filepath.Join(t.TempDir(), fmt.Sprintf("mdbus-%d", os.Geteuid()+1))
	require.NoError(t, os.Mkdir(other, 0o700))
	_, err = Create(Config{Dir: other, Interval: -1})
	require.ErrorIs(t, err, ErrNotPrivate)
	_, err = Scan(other)
	require.ErrorIs(t, err, ErrNotPrivate)

	// A directory of another user (testable as root): writers refuse it.
	if os.Geteuid() == 0 {
		theirs := filepath.Join(t.TempDir(), "theirs")
		require.NoError(t, os.Mkdir(theirs, 0o700))
		if err := os.Chown(theirs, 4242, 4242); err != nil {
			t.Logf("chown not possible here (%v): foreign directory not tested", err)
			return
		}
		_, err = Create(Config{Dir: theirs, Interval: -1})
		require.ErrorIs(t, err, ErrNotPrivate)
		_, err = Scan(theirs) // root reads every user's directory
		require.NoError(t, err)
	}
}

func TestDefaultDir(t *testing.T) {
	require.Equal(t, fmt.Sprintf("/dev/shm/mdbus-%d", os.Geteuid()), DefaultDir())
	u, ok := DirOwner(DefaultDir())
	require.True(t, ok)
	require.Equal(t, os.Geteuid(), u)
	for _, bad := range []string{"/dev/shm/mdbus", "/dev/shm/mdbus-", "/x/mdbus-01", "/x/mdbus-1a", "/x/mdbus--1"} {
		_, ok := DirOwner(bad)
		require.False(t, ok, bad)
	}
}

// TestScanHostileFiles: what another program puts in the directory
// under a counters file's name is listed as skipped, at once, and never
// read: a FIFO (which blocked Scan for good), a link to a real file, a
// directory, a device; a file of another owner (root can make one); a
// file naming a live process of another user.
func TestScanHostileFiles(t *testing.T) {
	dir := t.TempDir()
	real := create(t, Config{Dir: dir, Role: "pub", Interval: -1})
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "sub-1.ctr"), 0o600))
	require.NoError(t, os.Symlink(real.Path(), filepath.Join(dir, "sub-2.ctr")))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "sub-3.ctr"), 0o700))
	want := map[string]string{
		filepath.Base(real.Path()): "live",
		"sub-1.ctr":                "skipped: FIFO",
		"sub-2.ctr":                "skipped: symbolic link",
		"sub-3.ctr":                "skipped: directory",
	}
	if os.Geteuid() == 0 {
		if err := syscall.Mknod(filepath.Join(dir, "sub-4.ctr"), syscall.S_IFCHR|0o600, 0x0103); err == nil { // /dev/null's numbers
			want["sub-4.ctr"] = "skipped: character device"
		}
		theirs := create(t, Config{Dir: dir, Role: "rewind", Interval: -1})
		if err := os.Chown(theirs.Path(), 4242, 4242); err == nil {
			want[filepath.Base(theirs.Path())] = "skipped: belongs to"
		}
	}
	// A file whose header names a live process of another user: pid 1
	// (root's) for a user, this process (root's) in a directory of
	// another user for root.
	fake := create(t, Config{Dir: dir, Role: "sub", Interval: -1})
	if os.Geteuid() != 0 {
		ticks, err := StartTicks(1)
		if err == nil {
			le.PutUint64(fake.mem[offPID:], 1)
			le.PutUint64(fake.mem[offStartTicks:], ticks)
			require.NoError(t, os.Rename(fake.Path(), filepath.Join(dir, "sub-5.ctr")))
			want["sub-5.ctr"] = "skipped: pid 1 runs as"
		}
	} else if err := os.Chown(fake.Path(), 4242, 4242); err == nil {
		fdir := filepath.Join(t.TempDir(), "theirs")
		require.NoError(t, os.Mkdir(fdir, 0o700))
		require.NoError(t, os.Chown(fdir, 4242, 4242))
		require.NoError(t, os.Rename(fake.Path(), filepath.Join(fdir, "sub-5.ctr")))
		es := scanWithin(t, fdir)
		require.Len(t, es, 1)
		require.Equal(t, Skipped, es[0].State)
		require.ErrorIs(t, es[0].Err, ErrForeign)
		require.ErrorContains(t, es[0].Err, fmt.Sprintf("pid %d runs as", os.Getpid()))
		require.Equal(t, 4242, es[0].Owner)
	}

	es := scanWithin(t, dir)
	got := map[string]string{}
	for _, e := range es {
		s := e.State.String()
		if e.Err != nil {
			s += ": " + e.Err.Error()
		}
		got[filepath.Base(e.Path)] = s
	}
	require.Len(t, got, len(want), "%v", got)
	for name, w := range want {
		state, detail, _ := strings.Cut(w, ": ")
		require.True(t, strings.HasPrefix(got[name], state), "%s: %s", name, got[name])
		require.Contains(t, got[name], detail, name)
	}
	for _, e := range es {
		if e.State == Skipped && !strings.Contains(e.Err.Error(), "runs as") && !strings.Contains(e.Err.Error(), "belongs to") {
			require.ErrorIs(t, e.Err, ErrNotRegular, e.Path)
		}
	}

	// Open refuses the same files, without blocking either.
	done := make(chan error, 1)
	go func() { _, err := Open(filepath.Join(dir, "sub-1.ctr")); done <- err }()
	select {
	case err := <-done:
		require.ErrorIs(t, err, ErrNotRegular)
	case <-time.After(time.Second):
		t.Fatal("Open blocked on a FIFO")
	}
	_, err := Open(filepath.Join(dir, "sub-2.ctr"))
	require.ErrorIs(t, err, ErrNotRegular)
}

// scanWithin scans dir and fails the test if that takes a second: a
// FIFO used to block Scan for good.
func scanWithin(t *testing.T, dir string) []Entry {
	t.Helper()
	type res struct {
		es  []Entry
		err error
	}
	ch := make(chan res, 1)
	go func() { es, err := Scan(dir); ch <- res{es, err} }()
	select {
	case r := <-ch:
		require.NoError(t, r.err)
		return r.es
	case <-time.After(time.Second):
		// Unblock the stuck open (a writer on each FIFO) so the test ends.
		fifos, _ := filepath.Glob(filepath.Join(dir, "*.ctr"))
		for _, p := range fifos {
			if fi, err := os.Lstat(p); err == nil && fi.Mode()&os.ModeNamedPipe != 0 {
				if w, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
					w.Close()
				}
			}
		}
		<-ch
		t.Fatal("Scan did not return within 1 s")
		return nil
	}
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

func TestAttachLatency(t *testing.T) {
	f := create(t, Config{Interval: -1})
	var d time.Duration
	AttachLatency(f, "sub", func() (time.Duration, bool) { return d, d > 0 })
	f.SampleNow()
	require.Empty(t, f.Snapshot().Values, "no slot before the first measurement")
	d = 1500 * time.Microsecond
	f.SampleNow()
	m := byLabel(f.Snapshot())
	require.Equal(t, int64(1500), m["sub|subscriber_latency_p99_seconds|"].Value)
	var b bytes.Buffer
	require.NoError(t, WritePrometheus(&b, f.Snapshot()))
	require.Contains(t, b.String(), `mdbus_subscriber_latency_p99_seconds{role="mdbus",owner="sub"} 0.0015`)
}

// A second Close, of a File or a Reader, returns ErrClosed (the house
// rule, README "House conventions"); two at once close the File once.
func TestCloseTwice(t *testing.T) {
	f := create(t, Config{Role: "pub"})
	r, err := Open(f.Path())
	require.NoError(t, err)
	require.NoError(t, r.Close())
	require.ErrorIs(t, r.Close(), ErrClosed)
	_, err = r.Snapshot()
	require.ErrorIs(t, err, ErrClosed)

	errs := make(chan error, 2)
	for range 2 {
		go func() { errs <- f.Close() }()
	}
	e1, e2 := <-errs, <-errs
	if e1 != nil {
		e1, e2 = e2, e1
	}
	require.NoError(t, e1)
	require.ErrorIs(t, e2, ErrClosed)
	require.ErrorIs(t, f.Close(), ErrClosed)
}
