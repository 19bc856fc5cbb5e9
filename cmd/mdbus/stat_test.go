//go:build unix

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
	"unicode/utf8"

	"github.com/mdbus/mdbus/tools/counters"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// synthProc is a counters file written by this test as a process would.
type synthProc struct {
	f     *counters.File
	slots map[string]*counters.Slot
}

// newSynth creates a counters file of role in dir, renamed to name (so
// that two files of one role and pid can coexist).
func newSynth(t *testing.T, dir, role, name string, args ...string) *synthProc {
	t.Helper()
	f, err := counters.Create(counters.Config{Dir: dir, Role: role, Interval: -1, Args: args})
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	if name != "" {
		require.NoError(t, os.Rename(f.Path(), filepath.Join(dir, name)))
	}
	return &synthProc{f: f, slots: map[string]*counters.Slot{}}
}

func (p *synthProc) set(k counters.Kind, label, owner string, v int64) {
	key := fmt.Sprint(k, label, owner)
	s := p.slots[key]
	if s == nil {
		s = p.f.Add(k, counters.Free, label, owner)
		p.slots[key] = s
	}
	s.Set(v)
}

// fourProcs writes the files of a publisher, a rewinder and two
// subscribers (one lossy) at step i (0, 1): step 1 is 100 ms of traffic
// later.
type fourProcs struct{ pub, rw, subA, subB *synthProc }

const synthSession = "SESSION001"

func newFourProcs(t *testing.T, dir string) *fourProcs {
	const group, retr = "239.192.78.1:31781", "127.0.0.1:31782"
	bin := "/home/someone/go/bin/mdbus"
	globals := []string{"--log-format", "json", "--counters-dir", dir}
	cmd := func(a ...string) []string { return append(append([]string{bin}, globals...), a...) }
	return &fourProcs{
		pub:  newSynth(t, dir, "pub", "", cmd("pub", "--group", group, "--synthetic", "--rate", "5000", "--duration", "60s", "--retransmit-listen", retr)...),
		rw:   newSynth(t, dir, "rewind", "", cmd("rewind", "--group", group, "--listen", retr, "--journal", "/var/lib/mdbus/journal", "--stats", "0")...),
		subA: newSynth(t, dir, "sub", "sub-a.ctr", cmd("sub", "--group", group, "--stats", "1s", "--retransmit", retr, "--start", "1")...),
		subB: newSynth(t, dir, "sub", "sub-b.ctr", cmd("sub", "--group", group, "--stats", "1s", "--retransmit", retr, "--start", "1", "--loss", "0.02")...),
	}
}

// step writes the four processes' counters at step i and samples them.
// It runs in a bubble: a step after the first comes one sampling period
// (20 ms) of the bubble's clock after the one before, so rates divide by
// the writers' sampling times.
func (fp *fourProcs) step(i int64) {
	if i > 0 {
		time.Sleep(20 * time.Millisecond)
	}
	n := 1000 + 500*i
	fp.pub.set(counters.PubMessages, "", "pub", n)
	fp.pub.set(counters.PubNextSeq, synthSession, "pub", n+1)
	fp.pub.set(counters.PubPackets, "", "pub", n/10)
	fp.rw.set(counters.SubMessages, "", "rewind-feed", n)
	fp.rw.set(counters.RetrRequests, "received", "rewind", 40+10*i)
	fp.rw.set(counters.RetrRequests, "answered", "rewind", 40+10*i)
	fp.rw.set(counters.RetrRequests, "refused-rate-limited", "rewind", 0)
	fp.rw.set(counters.CacheMessages, "", "rewind", n)
	for j, sp := range []*synthProc{fp.subA, fp.subB} {
		lossy := int64(j)
		got := n - 12*lossy // the lossy one is 12 behind, recovering
		stream := "sub/" + synthSession + "@127.0.0.1:40001"
		sp.set(counters.SubMessages, "", "sub", got)
		sp.set(counters.SubGaps, "", "sub", 20*lossy*(i+1))
		sp.set(counters.SubDupDropped, "", "sub", 3*lossy)
		sp.set(counters.SubLatencyP99, "", "sub", 52+100*lossy)
		sp.set(counters.StreamNextSeq, "", stream, got+1)
		sp.set(counters.StreamHorizon, "", stream, n+1)
		sp.set(counters.StreamMessages, "", stream, got)
		sp.set(counters.StreamGaps, "", stream, 20*lossy*(i+1))
		sp.set(counters.StreamNAKs, "", stream, 18*lossy*(i+1))
		sp.set(counters.StreamLost, "", stream, lossy)
		sp.set(counters.StreamDupDropped, "", stream, 3*lossy)
		sp.set(counters.StreamRecoveryP99, "", stream, 2100*lossy)
		sp.set(counters.StreamProgressAge, "", stream, 0)
		sp.set(counters.StreamState, "", stream, int64(counters.StreamRunning))
	}
	for _, sp := range []*synthProc{fp.pub, fp.rw, fp.subA, fp.subB} {
		sp.f.SampleNow()
	}
}

// TestStatFitsTerminal is acceptance 3 of issue 19: four processes in
// the default view fit 80x24, one line per process and per stream, with
// rates, the lag against the publisher, gaps, NAKs, lost, recovery p99,
// age and state; a lossy subscriber reads differently from a clean one.
func TestStatFitsTerminal(t *testing.T) { synctest.Test(t, testStatFitsTerminal) }

// testStatFitsTerminal runs in a bubble: the counters' sampling times
// and the viewer's clock are the bubble's, so rates are exact.
func testStatFitsTerminal(t *testing.T) {
	dir := t.TempDir()
	fp := newFourProcs(t, dir)
	fp.step(0)
	sv := newStatViewer(dir, false, true)
	defer sv.close()
	_, _, err := sv.view()
	require.NoError(t, err)
	fp.step(1)
	dirs, procs, err := sv.view()
	require.NoError(t, err)
	var b bytes.Buffer
	renderStat(&b, dir, dirs, procs, false)
	screen := b.String()
	t.Logf("default view:\n%s", screen)
	lines := strings.Split(strings.TrimSuffix(screen, "\n"), "\n")
	require.LessOrEqual(t, len(lines), 24, "rows")
	for _, l := range lines {
		require.LessOrEqual(t, utf8.RuneCountInString(l), 80, "columns: %q", l)
	}
	require.Len(t, lines, 3+4+2, "title, two headers, four processes, two streams")
	require.Regexp(t, `^pub +\d+ running +\S+ +\S+k? +next 1501 · --group`, lines[3])
	require.Regexp(t, `^rewind +\d+ running +\S+ +\S+ +req \S+/s · --group`, lines[4])
	require.Regexp(t, `^sub +\d+ running +\S+ +\S+ +lat99 52us · …$`, lines[5])
	// The clean subscriber's stream: rate, no lag, no gaps.
	require.Regexp(t, `^  SESSION001@127\.0\.0\.1:40001 +\d\S* +0 +0 +0 +0 +- +0\.0s running$`, lines[6])
	require.Regexp(t, `^sub +\d+ running +\S+ +\S+ +lat99 152us · … --loss 0\.02$`, lines[7])
	// The lossy one: 12 behind the publisher, gaps, NAKs, lost, RCV99.
	require.Regexp(t, `^  SESSION001@127\.0\.0\.1:40001 +\d\S* +12 +40 +36 +1 +2\.1ms +0\.0s running$`, lines[8])
	for _, l := range lines[3:] {
		require.NotContains(t, l, "/home/someone", "the program path is dropped")
		require.NotContains(t, l, "--counters-dir", "shared global flags are dropped")
	}
	// Every process and stream shows a rate, not "-".
	require.NotRegexp(t, `running +\S+ +- `, screen)
}

// TestStatOnceRatesAndJSON: --once samples twice, --window apart, so the
// one view has rates; --json carries them and the stream summaries.
func TestStatOnceRatesAndJSON(t *testing.T) { synctest.Test(t, testStatOnceRatesAndJSON) }

// testStatOnceRatesAndJSON runs in a bubble: the traffic falls inside the
// 200 ms window on the bubble's clock, whatever the host's load.
func testStatOnceRatesAndJSON(t *testing.T) {
	dir := t.TempDir()
	fp := newFourProcs(t, dir)
	fp.step(0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { // traffic while stat samples: 20 ms in, inside --window's 200 ms, after the first sample
		fp.step(1)
	}()
	var out bytes.Buffer
	require.NoError(t, runStat(ctx, []string{"--once", "--json", "--window", "200ms", "--dir", dir}, &out))
	var view struct {
		Processes []statProc
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &view), out.String())
	require.Len(t, view.Processes, 4)
	rates := 0
	for _, p := range view.Processes {
		for _, v := range p.Values {
			if v.Rate != nil && *v.Rate > 0 {
				rates++
			}
		}
		if p.Role == "sub" {
			require.Len(t, p.Streams, 1)
			s := p.Streams[0]
			require.NotNil(t, s.Rate)
			require.Greater(t, *s.Rate, 0.0)
			require.NotNil(t, s.Lag)
			require.Equal(t, "publisher", s.LagFrom)
			require.Equal(t, "running", s.State)
		}
	}
	require.Greater(t, rates, 4, "rates in --once --json")
}

// TestStatEscapesFileStrings: role, command line, labels and owners come
// from a file anyone of the user's programs may have written; none of
// their control characters reaches the terminal, in either view.
func TestStatEscapesFileStrings(t *testing.T) {
	dir := t.TempDir()
	f, err := counters.Create(counters.Config{Dir: dir, Role: "x\x1b]0;pwned\x07", Interval: -1,
		Args: []string{"mdbus", "sub\x1b[2J\x1b[31mALERT: feed down\x1b[0m", "\u202egnp.exe", "\x9b31m"}})
	require.NoError(t, err)
	defer f.Close()
	f.Add(counters.KindCustom, counters.Gauge, "lab\x1b[5mel", "own\x1b[H").Set(1)
	f.Add(counters.StreamMessages, counters.Free, "", "sub/S\x1b[1A@127.0.0.1:1\r").Set(1)
	f.SampleNow()
	sv := newStatViewer(dir, false, true)
	defer sv.close()
	dirs, procs, err := sv.view()
	require.NoError(t, err)
	for _, full := range []bool{false, true} {
		var b bytes.Buffer
		if full {
			renderFull(&b, dir, dirs, procs)
		} else {
			renderStat(&b, dir, dirs, procs, false)
		}
		s := b.String()
		t.Logf("full %v:\n%s", full, s)
		for _, r := range s {
			require.False(t, r != '\n' && unsafeRune(r), "full %v: %U reached the terminal", full, r)
		}
		require.Contains(t, s, `x\x1b]0`)
		require.Contains(t, s, `sub\x1b[2J`)
		if full {
			require.Contains(t, s, `x\x1b]0;pwned\x07`)
			require.Contains(t, s, `lab\x1b[5mel`)
			require.Contains(t, s, `own\x1b[H`)
			require.Contains(t, s, `\u202egnp.exe`)
		}
	}
}

func TestTermSafe(t *testing.T) {
	for in, want := range map[string]string{"plain": "plain", "a\x1bb": `a\x1bb`, "tab\t": `tab\x09`, "del\x7f": `del\x7f`,
		"c1\u009b": `c1\u009b`, "rlo\u202e": `rlo\u202e`, "é ü 日本": "é ü 日本", "zw\u200b": `zw\u200b`, "ls\u2028": `ls\u2028`} {
		require.Equal(t, want, termSafe(in), "%q", in)
	}
}

// hostileDir is a counters directory with one live file and what another
// program may put next to it: a FIFO, a link, a directory.
func hostileDir(t *testing.T) string {
	dir := t.TempDir()
	f, err := counters.Create(counters.Config{Dir: dir, Role: "pub", Interval: -1})
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	f.Add(counters.PubMessages, counters.Free, "", "pub").Set(1)
	f.SampleNow()
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "sub-1.ctr"), 0o600))
	require.NoError(t, os.Symlink(f.Path(), filepath.Join(dir, "sub-2.ctr")))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "sub-3.ctr"), 0o700))
	return dir
}

// runStatWithin runs mdbus stat with args; it fails the test if stat
// has not returned d after cancel is called: once its output holds
// cancelOn, or at once when cancelOn is empty (--once must end by
// itself).
func runStatWithin(t *testing.T, args []string, cancelOn string, d time.Duration) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out lockedBuffer
	done := make(chan error, 1)
	go func() { done <- runStat(ctx, args, &out) }()
	if cancelOn != "" {
		// A view that never shows cancelOn falls through to the bound
		// below, which unblocks a stuck open before failing.
		if assert.Eventually(t, func() bool { return strings.Contains(out.String(), cancelOn) }, 10*time.Second, time.Millisecond) {
			cancel() // what SIGTERM does (notifyContext)
		}
	}
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(d):
		// Unblock a stuck open so that the goroutine ends with the test.
		for _, p := range []string{"sub-1.ctr"} {
			if w, err := os.OpenFile(filepath.Join(args[len(args)-1], p), os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				w.Close()
			}
		}
		t.Fatalf("mdbus stat %v did not return within %v", args, d)
	}
	return out.String()
}

// lockedBuffer is a bytes.Buffer that a test reads while stat writes it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestStatOnceSkipsFIFO is acceptance 4 of issue 18: a FIFO named like a
// counters file made stat --once block for good; now it, a link and a
// directory are listed as skipped within 1 s, and the live file shows.
func TestStatOnceSkipsFIFO(t *testing.T) {
	dir := hostileDir(t)
	out := runStatWithin(t, []string{"--once", "--window", "0", "--dir", dir}, "", time.Second)
	t.Logf("\n%s", out)
	require.Regexp(t, `(?m)^pub +\d+ running `, out)
	require.Regexp(t, `(?m)^sub +1 skipped +counters: not a regular file: a FIFO`, out)
	require.Regexp(t, `(?m)^sub +2 skipped +counters: not a regular file: a symbolic link`, out)
	require.Regexp(t, `(?m)^sub +3 skipped +counters: not a regular file: a directory`, out)
	_, err := os.Lstat(filepath.Join(dir, "sub-1.ctr"))
	require.NoError(t, err, "what is skipped is left alone")
}

// TestStatLiveEndsOnSignal: the live view ends when the signal context
// does, with a FIFO in the directory too (cancelled once a view has shown
// it skipped).
func TestStatLiveEndsOnSignal(t *testing.T) {
	dir := hostileDir(t)
	out := runStatWithin(t, []string{"--interval", "50ms", "--dir", dir}, "skipped", time.Second)
	require.Contains(t, out, "skipped")
}

// TestStatRefusesSharedDir: a directory others may write to is not read.
func TestStatRefusesSharedDir(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.Chmod(dir, 0o777|os.ModeSticky))
	err := runStat(context.Background(), []string{"--once", "--dir", dir}, &bytes.Buffer{})
	require.ErrorIs(t, err, counters.ErrNotPrivate)
	require.ErrorContains(t, err, "chmod go-w")
}

func TestShortCmdline(t *testing.T) {
	require.Equal(t, "sub --group g --loss 0.02",
		shortCmdline("/x/mdbus --log-format json --counters-dir /tmp/c --metrics=:0 --counters sub --group g --loss 0.02"))
	require.Equal(t, "", shortCmdline(""))
}

// TestStatAllUsers: with --all-users every user's directory is read and
// each process line names its user; a directory named for one user but
// owned by another is reported, not read.
func TestStatAllUsers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to make another user's directory")
	}
	tmp := t.TempDir()
	mine := filepath.Join(tmp, fmt.Sprintf("mdbus-%d", os.Geteuid()))
	f, err := counters.Create(counters.Config{Dir: mine, Role: "pub", Interval: -1})
	require.NoError(t, err)
	defer f.Close()
	f.SampleNow()
	theirs := filepath.Join(tmp, "mdbus-424242")
	require.NoError(t, os.Mkdir(theirs, 0o700))
	require.NoError(t, syscall.Mkfifo(filepath.Join(theirs, "sub-7.ctr"), 0o600))
	require.NoError(t, os.Chown(filepath.Join(theirs, "sub-7.ctr"), 424242, 424242))
	require.NoError(t, os.Chown(theirs, 424242, 424242))
	squatted := filepath.Join(tmp, "mdbus-424243") // made by root for uid 424243
	require.NoError(t, os.Mkdir(squatted, 0o700))

	sv := newStatViewer("", true, false)
	sv.prefix = filepath.Join(tmp, "mdbus-")
	defer sv.close()
	dirs, procs, err := sv.view()
	require.NoError(t, err)
	var b bytes.Buffer
	renderStat(&b, sv.prefix+"*", dirs, procs, true)
	out := b.String()
	t.Logf("\n%s", out)
	require.Regexp(t, `(?m)^ROLE +PID USER +STATE`, out)
	require.Regexp(t, `(?m)^pub +\d+ root +running `, out)
	require.Regexp(t, `(?m)^sub +7 uid 424… skipped +counters: not a regular file: a FIFO`, out)
	require.Regexp(t, `(?m)^! counters: directory not private: .*mdbus-424243 belongs to root, not to uid 424243`, out)
}

// FuzzTermSafe: whatever a file holds, what termSafe returns has no rune
// a terminal acts on, and is valid UTF-8.
func FuzzTermSafe(f *testing.F) {
	for _, s := range []string{"", "plain", "\x1b]0;t\x07", "\xff\xfe", "\u202e\u2028", "\x9b", "é\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := termSafe(s)
		if !utf8.ValidString(out) {
			t.Fatalf("%q: invalid UTF-8 %q", s, out)
		}
		for _, r := range out {
			if unsafeRune(r) {
				t.Fatalf("%q: %U in %q", s, r, out)
			}
		}
	})
}
