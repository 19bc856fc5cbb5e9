//go:build linux

package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mdbus/mdbus/tools/counters"
	"github.com/stretchr/testify/require"
)

// The ops tests run the mdbus binary as separate processes, as an
// operator would, and look at them from outside: counters files, mdbus
// stat, --metrics, signals.

// proc is a running mdbus process whose stderr (JSON logs) is kept.
type proc struct {
	name   string
	cmd    *exec.Cmd
	mu     sync.Mutex
	stderr bytes.Buffer
	stdout bytes.Buffer
	done   chan struct{}
	err    error
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func startMdbus(t *testing.T, bin, ctrDir, name string, args ...string) *proc {
	t.Helper()
	p := newMdbus(bin, ctrDir, name, args...)
	p.start(t)
	return p
}

// newMdbus prepares an mdbus process logging JSON, with its counters in
// ctrDir.
func newMdbus(bin, ctrDir, name string, args ...string) *proc {
	p := &proc{name: name, done: make(chan struct{})}
	p.cmd = exec.Command(bin, append([]string{"--log-format", "json", "--counters-dir", ctrDir}, args...)...)
	p.cmd.Stderr = lockedWriter{&p.mu, &p.stderr}
	p.cmd.Stdout = lockedWriter{&p.mu, &p.stdout}
	return p
}

func (p *proc) start(t *testing.T) {
	t.Helper()
	require.NoError(t, p.cmd.Start())
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("%s stderr:\n%s", p.name, p.logs())
		}
	})
}

func (p *proc) out() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stdout.String()
}

func (p *proc) logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

// records returns the JSON log records with message msg.
func (p *proc) records(msg string) []map[string]any {
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(p.logs()))
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil && m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// wait waits for the process to exit and returns its exit code.
func (p *proc) wait(t *testing.T, d time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(d):
		t.Fatalf("%s did not exit within %v", p.name, d)
	}
	return p.cmd.ProcessState.ExitCode()
}

// metricsURL waits for the process to log where it serves metrics.
func (p *proc) metricsURL(t *testing.T) string {
	t.Helper()
	var url string
	if !poll(20*time.Second, func() bool {
		if rs := p.records("serving Prometheus metrics"); len(rs) > 0 {
			url = rs[0]["url"].(string)
		}
		return url != ""
	}) {
		t.Fatalf("%s: no metrics URL logged", p.name)
	}
	return url
}

// snapshots reads every live counters file of dir, by role.
func snapshots(t *testing.T, dir string) map[string]counters.Snapshot {
	t.Helper()
	es, err := counters.Scan(dir)
	require.NoError(t, err)
	out := map[string]counters.Snapshot{}
	for _, e := range es {
		if e.State != counters.Live {
			continue
		}
		r, err := counters.Open(e.Path)
		if err != nil {
			continue // gone between the scan and the open
		}
		s, err := r.Snapshot()
		r.Close()
		require.NoError(t, err)
		out[s.Role+"/"+fmt.Sprint(s.PID)] = s
	}
	return out
}

// value returns the value of kind (and label) owned by owner in s.
func value(s counters.Snapshot, owner string, k counters.Kind, label string) (int64, bool) {
	for _, v := range s.Values {
		if v.Owner == owner && v.Kind == k && v.Label == label {
			return v.Value, true
		}
	}
	return 0, false
}

func mustValue(t *testing.T, s counters.Snapshot, owner string, k counters.Kind, label string) int64 {
	t.Helper()
	v, ok := value(s, owner, k, label)
	require.True(t, ok, "%s has no %s{%s} of %s", s.Role, k.Name(), label, owner)
	return v
}

func num(t *testing.T, rec map[string]any, key string) int64 {
	t.Helper()
	v, ok := rec[key].(float64)
	require.True(t, ok, "summary has no number %q: %v", key, rec)
	return int64(v)
}

// TestOpsCountersMatchSummaries: a
// publisher, a rewinder and two subscribers (one losing 2% of datagrams)
// run as separate mdbus processes; this process reads their counters
// files while they run, scrapes --metrics of each role through promtool,
// then SIGTERMs them: each exits 0 with a summary that matches its
// counters, and no counters file is left. A SIGKILLed process leaves a
// file that mdbus stat reports stale and removes.
func TestOpsCountersMatchSummaries(t *testing.T) {
	_, bin, ctr := opsLab(t)
	const group, listen = "239.192.77.1:31771", "127.0.0.1:31779"
	n := scale(30000, 10000)
	metrics := []string{"--metrics", "127.0.0.1:0"}

	rw := startMdbus(t, bin, ctr, "rewind", append(metrics, "rewind", "--group", group, "--listen", listen, "--stats", "0")...)
	subA := startMdbus(t, bin, ctr, "subA", append(metrics, "sub", "--group", group, "--stats", "1s", "--retransmit", listen, "--start", "1")...)
	subB := startMdbus(t, bin, ctr, "subB", append(metrics, "sub", "--group", group, "--stats", "1s", "--retransmit", listen, "--start", "1",
		"--loss", "0.02", "--impair-seed", "11")...)
	waitFor(t, 20*time.Second, func() bool { return len(snapshots(t, ctr)) >= 3 }) // the three counters files
	// The rewinder and the subscribers have joined: each creates its
	// counters file after it has (cmd/mdbus: the role, then startOps).
	rwURL, aURL, bURL := rw.metricsURL(t), subA.metricsURL(t), subB.metricsURL(t)
	pub := startMdbus(t, bin, ctr, "pub", append(metrics, "pub", "--group", group, "--synthetic", "--count", fmt.Sprint(n),
		"--rate", "20000", "--hold", "60s")...)
	pubURL := pub.metricsURL(t)

	// Read the counters while the processes run, until everything is
	// delivered and has stayed put.
	// Sampled every 100 ms so that a sample falls mid-run (the run lasts
	// about a second at 20,000/s).
	var last map[string]counters.Snapshot
	midRun, stable := false, 0
	complete := pollEach(60*time.Second, 100*time.Millisecond, func() bool {
		snaps := snapshots(t, ctr)
		require.Len(t, snaps, 4)
		done := true
		for _, s := range snaps {
			// A value may be missing for a moment: a process creates its
			// counters file, then attaches its counters to it.
			switch s.Role {
			case "pub":
				m, ok := value(s, "pub", counters.PubMessages, "")
				midRun = midRun || (m > 0 && m < int64(n))
				done = done && ok && m == int64(n)
			case "sub":
				m, ok := value(s, "sub", counters.SubMessages, "")
				done = done && ok && m == int64(n)
			case "rewind":
				m, ok := value(s, "rewind", counters.CacheMessages, "")
				done = done && ok && m == int64(n)
			}
		}
		if done && fmt.Sprint(valuesOf(snaps)) == fmt.Sprint(valuesOf(last)) {
			stable++
		} else {
			stable = 0
		}
		last = snaps
		return stable >= 5
	})
	require.True(t, complete, "the run did not complete: %v", last)
	require.True(t, midRun, "the publisher's counters were read while it was sending")

	// Prometheus: every role's endpoint passes promtool.
	for role, url := range map[string]string{"pub": pubURL, "rewind": rwURL, "subA": aURL, "subB": bURL} {
		body := scrape(t, url)
		require.Contains(t, string(body), "mdbus_", role)
		require.Contains(t, string(body), "go_goroutines", role)
		promtoolCheck(t, role, body)
	}

	// SIGTERM: each exits 0 with its summary and removes its file.
	for _, p := range []*proc{pub, subA, subB, rw} {
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	}
	for _, p := range []*proc{pub, subA, subB, rw} {
		require.Equal(t, 0, p.wait(t, 20*time.Second), "%s exit code; stderr:\n%s", p.name, p.logs())
		require.Len(t, p.records("summary"), 1, p.name)
	}
	left, err := filepath.Glob(filepath.Join(ctr, "*"))
	require.NoError(t, err)
	require.Empty(t, left, "counters files left behind")

	// The figures read from outside match the processes' own summaries.
	for _, s := range last {
		switch s.Role {
		case "pub":
			sum := pub.records("summary")[0]
			require.Equal(t, int64(n), num(t, sum, "messages"))
			t.Logf("pub: counters = summary: messages %d packets %d bytes %d", num(t, sum, "messages"), num(t, sum, "packets"), num(t, sum, "bytes"))
			for key, k := range map[string]counters.Kind{"messages": counters.PubMessages, "packets": counters.PubPackets,
				"bytes": counters.PubBytes, "published": counters.PubPublished} {
				require.Equal(t, num(t, sum, key), mustValue(t, s, "pub", k, ""), "pub %s", key)
			}
		case "rewind":
			sum := rw.records("summary")[0]
			for key, k := range map[string]counters.Kind{"cached": counters.CacheMessages, "cached_bytes": counters.CacheBytes} {
				require.Equal(t, num(t, sum, key), mustValue(t, s, "rewind", k, ""), "rewind %s", key)
			}
			require.Equal(t, num(t, sum, "requests"), mustValue(t, s, "rewind", counters.RetrRequests, "received"))
			require.Equal(t, num(t, sum, "answered"), mustValue(t, s, "rewind", counters.RetrRequests, "answered"))
			require.Equal(t, num(t, sum, "feed_messages"), mustValue(t, s, "rewind-feed", counters.SubMessages, ""))
			require.Positive(t, num(t, sum, "answered"), "the lossy subscriber's re-requests were answered")
			t.Logf("rewind: counters = summary: cached %d, requests %d, answered %d", num(t, sum, "cached"), num(t, sum, "requests"), num(t, sum, "answered"))
		case "sub":
			p := subA
			if s.PID == subB.cmd.Process.Pid {
				p = subB
			}
			sum := p.records("summary")[0]
			for key, k := range map[string]counters.Kind{"messages": counters.SubMessages, "bytes": counters.SubBytes,
				"duplicates": counters.SubDupDropped, "gaps": counters.SubGaps, "naks": counters.SubNAKs,
				"repairs": counters.SubRepairs, "recovered": counters.SubRecovered, "lost": counters.SubLost} {
				require.Equal(t, num(t, sum, key), mustValue(t, s, "sub", k, ""), "%s %s", p.name, key)
			}
			require.Equal(t, int64(n), num(t, sum, "messages"))
			require.Zero(t, num(t, sum, "lost"), p.name)
			// One stream, its row agrees with the totals.
			var streamMsgs int64
			for _, v := range s.Values {
				if v.Kind == counters.StreamMessages {
					streamMsgs += v.Value
					require.True(t, strings.HasPrefix(v.Owner, "sub/"), v.Owner)
				}
			}
			require.Equal(t, int64(n), streamMsgs, "%s per-stream messages", p.name)
			if p == subB {
				require.Positive(t, num(t, sum, "gaps"), "subB loses 2%% and recovers")
				require.Positive(t, num(t, sum, "recovered"))
			} else {
				require.Zero(t, num(t, sum, "gaps"), "subA loses nothing")
			}
			require.Positive(t, num(t, sum, "latency_count"), "%s measured one-way latency", p.name)
			t.Logf("%s: counters = summary: messages %d gaps %d naks %d recovered %d lost %d; one-way p50 %v p99 %v",
				p.name, num(t, sum, "messages"), num(t, sum, "gaps"), num(t, sum, "naks"), num(t, sum, "recovered"), num(t, sum, "lost"),
				time.Duration(num(t, sum, "latency_p50")), time.Duration(num(t, sum, "latency_p99")))
		}
	}

	// SIGKILL leaves a file; mdbus stat reports it stale and removes it.
	victim := startMdbus(t, bin, ctr, "victim", "sub", "--group", group, "--stats", "1s")
	waitFor(t, 20*time.Second, func() bool { return len(snapshots(t, ctr)) >= 1 }) // the victim's counters file did not appear
	require.NoError(t, victim.cmd.Process.Kill())
	victim.wait(t, 10*time.Second)
	left, _ = filepath.Glob(filepath.Join(ctr, "*.ctr"))
	require.Len(t, left, 1, "SIGKILL leaves the file")
	out, err := exec.Command(bin, "stat", "--once", "--json", "--dir", ctr).Output()
	require.NoError(t, err)
	var view struct {
		Processes []struct {
			Path, State string
			PID         int
			Removed     bool
		}
	}
	require.NoError(t, json.Unmarshal(out, &view), "%s", out)
	require.Len(t, view.Processes, 1)
	require.Equal(t, "stale", view.Processes[0].State)
	require.Equal(t, victim.cmd.Process.Pid, view.Processes[0].PID)
	require.True(t, view.Processes[0].Removed)
	left, _ = filepath.Glob(filepath.Join(ctr, "*.ctr"))
	require.Empty(t, left, "mdbus stat cleaned the stale file")
}

func valuesOf(snaps map[string]counters.Snapshot) map[string][]int64 {
	out := map[string][]int64{}
	for k, s := range snaps {
		for _, v := range s.Values {
			if v.Kind == counters.StreamProgressAge || v.Kind == counters.PubHeartbeats || v.Kind == counters.SubHeartbeats ||
				v.Kind == counters.SubPackets || v.Kind == counters.SubDatagrams {
				continue // they move with heartbeats and time while the session holds
			}
			out[k] = append(out[k], v.Value)
		}
	}
	return out
}

func scrape(t *testing.T, url string) []byte {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return b
}

// promtoolCheck runs `promtool check metrics` (Debian package prometheus)
// on text; without promtool it skips, or fails under CI=true.
func promtoolCheck(t *testing.T, what string, text []byte) {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("promtool not found: apt-get install prometheus")
		}
		t.Logf("promtool not found (apt-get install prometheus): %s metrics not checked", what)
		return
	}
	cmd := exec.Command(path, "check", "metrics")
	cmd.Stdin = bytes.NewReader(text)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "promtool on %s: %s", what, out)
}

// TestOpsSignalEveryCommand is acceptance 4 for the commands the first
// test does not run: demo, impair, pub reading standard input, the StatsD
// relay and collector, bench.
// SIGTERM mid-run: exit 0, a summary, no counters file left.
func TestOpsSignalEveryCommand(t *testing.T) {
	tmp, bin, ctr := opsLab(t)
	hasFile := func(role string) bool {
		for _, s := range snapshots(t, ctr) {
			if s.Role == role {
				return true
			}
		}
		return false
	}
	for _, tc := range []struct {
		role    string
		args    []string
		summary func(p *proc) bool
		ready   func(p *proc) bool
	}{
		{"demo", []string{"demo", "--netns=false", "--group", "239.192.79.1:31791", "--duration", "60s", "--rate", "20000", "--subscribers", "2"},
			func(p *proc) bool {
				return strings.Contains(p.out(), "summary: sent") && strings.Contains(p.out(), "COMPLETE")
			},
			func(p *proc) bool { return strings.Contains(p.out(), "t=") }},
		{"impair", []string{"impair", "--in", "239.192.79.2:31792", "--out", "239.192.79.3:31793", "--duration", "60s"},
			func(p *proc) bool { return len(p.records("summary")) == 1 },
			func(p *proc) bool { return len(p.records("relaying")) == 1 }},
		{"pub", []string{"pub", "--group", "239.192.79.4:31794"},
			func(p *proc) bool {
				r := p.records("summary")
				return len(r) == 1 && r[0]["published"] == float64(0)
			},
			func(p *proc) bool { return len(p.records("publishing")) == 1 }},
		{"statsd-relay", []string{"statsd", "relay", "--listen", "127.0.0.1:18125", "--retransmit", "127.0.0.1:18126", "--group", "239.192.79.5:31795"},
			func(p *proc) bool { return strings.Contains(p.logs(), "mdbus statsd relay: datagrams") },
			func(p *proc) bool { return strings.Contains(p.logs(), "mdbus statsd relay: udp") }},
		{"statsd-collect", []string{"statsd", "collect", "--retransmit", "127.0.0.1:18126", "--group", "239.192.79.5:31795"},
			func(p *proc) bool { return strings.Contains(p.logs(), "mdbus statsd collect: bus messages") },
			func(p *proc) bool { return strings.Contains(p.logs(), "mdbus statsd collect: 239") }},
		{"bench", []string{"bench", "throughput", "--netns=false", "--systems", "mdbus", "--duration", "30s", "--out", tmp, "--rate", "20k"},
			func(p *proc) bool { return strings.Contains(p.out(), "mdbus") },
			// Ready when its progress line says a run started: the signal
			// must find a run under way.
			func(p *proc) bool { return strings.Contains(p.logs(), "mdbus bench: run 1") }},
	} {
		t.Run(tc.role, func(t *testing.T) {
			p := newMdbus(bin, ctr, tc.role, tc.args...)
			if tc.role == "pub" { // standard input stays open: a blocked read must not delay the end
				r, w, err := os.Pipe()
				require.NoError(t, err)
				defer w.Close()
				defer r.Close()
				p.cmd.Stdin = r
			}
			p.start(t)
			require.True(t, pollEach(30*time.Second, 50*time.Millisecond, func() bool { return tc.ready(p) && (tc.role == "bench" || hasFile(tc.role)) }),
				"%s did not get going:\n%s\n%s", tc.role, p.logs(), p.out())
			require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
			require.Equal(t, 0, p.wait(t, 30*time.Second), "exit code; stderr:\n%s", p.logs())
			require.True(t, tc.summary(p), "no summary; stdout:\n%s\nstderr:\n%s", p.out(), p.logs())
			require.False(t, hasFile(tc.role), "counters file left")
		})
	}
	left, _ := filepath.Glob(filepath.Join(ctr, "*.ctr"))
	require.Empty(t, left)
}

// TestOpsMalformedStormIsOneLinePerInterval: thousands of garbage
// datagrams on a subscriber's group give a log line per interval with a
// count (and what to do), and the counts add up to the summary's.
func TestOpsMalformedStormIsOneLinePerInterval(t *testing.T) {
	_, bin, ctr := opsLab(t)
	const group = "239.192.81.1:31811"
	sub := startMdbus(t, bin, ctr, "sub", "sub", "--group", group, "--stats", "1s")
	waitFor(t, 20*time.Second, func() bool { return len(snapshots(t, ctr)) >= 1 }) // the subscriber did not start
	c, err := net.Dial("udp4", group)
	require.NoError(t, err)
	defer c.Close()
	const n = 3000
	for i := range n {
		_, err := c.Write([]byte("hello"))
		require.NoError(t, err)
		if i%100 == 99 {
			// A rate on the wall clock on purpose: ~1.5 s of storm, over
			// a few log intervals, each burst within the receive buffer.
			time.Sleep(50 * time.Millisecond)
		}
	}
	// Every datagram read (the storm fits the receive buffer): the bound
	// only decides how long a run that lost some takes.
	poll(10*time.Second, func() bool {
		for _, s := range snapshots(t, ctr) {
			if v, ok := value(s, "sub", counters.SubDatagrams, ""); ok && v >= n {
				return true
			}
		}
		return false
	})
	require.NoError(t, sub.cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(t, 0, sub.wait(t, 20*time.Second))
	lines := sub.records("datagrams dropped")
	require.NotEmpty(t, lines)
	require.LessOrEqual(t, len(lines), 5, "one line per interval, not per packet")
	var sum int64
	for _, l := range lines {
		require.Equal(t, "short-header", l["reason"])
		require.NotEmpty(t, l["fix"])
		sum += num(t, l, "count")
	}
	dropped := num(t, sub.records("summary")[0], "dropped")
	require.Equal(t, dropped, sum)
	require.Greater(t, dropped, int64(n/2))
}

// TestOpsSecondSignalExitsAtOnce: a demo whose subscribers lose every
// datagram waits for them after the first SIGTERM; a second SIGTERM ends
// it at once, exit 1, and still removes the counters file.
func TestOpsSecondSignalExitsAtOnce(t *testing.T) {
	_, bin, ctr := opsLab(t)
	p := startMdbus(t, bin, ctr, "demo", "demo", "--netns=false", "--group", "239.192.82.1:31821", "--duration", "60s",
		"--rate", "5000", "--subscribers", "1", "--loss", "1", "--no-rewinder")
	require.True(t, poll(30*time.Second, func() bool { return strings.Contains(p.out(), "t=") }), "demo did not get going:\n%s", p.logs())
	require.Len(t, snapshots(t, ctr), 1)
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	// Real time on purpose: the lab takes a second signal within 500 ms
	// for a relayed copy of the first (netlab's de-duplication window).
	time.Sleep(500 * time.Millisecond)
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	start := time.Now()
	require.Equal(t, 1, p.wait(t, 10*time.Second))
	require.Less(t, time.Since(start), 3*time.Second, "the second signal exits at once, not after the 5 s catch-up wait")
	require.Contains(t, p.logs(), "second signal: exiting at once")
	left, _ := filepath.Glob(filepath.Join(ctr, "*.ctr"))
	require.Empty(t, left, "the counters file is removed even on the immediate exit")
}

// TestOpsMetricsOtherRoles: promtool passes on --metrics of the roles the
// first test does not run (StatsD relay and collector, impair, demo),
// whose counters come from AttachStruct and several owners in one file.
func TestOpsMetricsOtherRoles(t *testing.T) {
	_, bin, ctr := opsLab(t)
	m := []string{"--metrics", "127.0.0.1:0"}
	procs := []*proc{
		startMdbus(t, bin, ctr, "statsd-relay", append(m, "statsd", "relay", "--listen", "127.0.0.1:18225", "--retransmit", "127.0.0.1:18226", "--group", "239.192.83.1:31831")...),
		startMdbus(t, bin, ctr, "statsd-collect", append(m, "statsd", "collect", "--retransmit", "127.0.0.1:18226", "--group", "239.192.83.1:31831")...),
		startMdbus(t, bin, ctr, "impair", append(m, "impair", "--in", "239.192.83.2:31832", "--out", "239.192.83.3:31833")...),
		startMdbus(t, bin, ctr, "demo", append(m, "demo", "--netns=false", "--group", "239.192.83.4:31834", "--duration", "60s", "--rate", "5000", "--subscribers", "1")...),
	}
	for _, p := range procs {
		url := p.metricsURL(t)
		var body []byte
		poll(10*time.Second, func() bool { body = scrape(t, url); return strings.Contains(string(body), "mdbus_") })
		require.Contains(t, string(body), "mdbus_", p.name)
		promtoolCheck(t, p.name, body)
	}
	for _, p := range procs {
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
		require.Equal(t, 0, p.wait(t, 30*time.Second), p.name)
	}
}

// TestOpsStatHostileDir is acceptance 4 of issue 18, run as an operator
// would: a FIFO and a link named like counters files are listed as
// skipped by `mdbus stat --once` within a second (the FIFO blocked it
// for good, beyond SIGTERM), and SIGTERM ends the live view.
func TestOpsStatHostileDir(t *testing.T) {
	_, bin, ctr := opsLab(t)
	pub := startMdbus(t, bin, ctr, "pub", "pub", "--group", "239.192.78.3:31783", "--synthetic", "--rate", "1000", "--duration", "60s")
	waitFor(t, 20*time.Second, func() bool { return len(snapshots(t, ctr)) >= 1 }) // no counters file
	require.NoError(t, syscall.Mkfifo(filepath.Join(ctr, "sub-1.ctr"), 0o600))
	require.NoError(t, os.Symlink("/etc/passwd", filepath.Join(ctr, "sub-2.ctr")))
	// Whatever happens, a stuck reader is released when the test ends.
	t.Cleanup(func() {
		if w, err := os.OpenFile(filepath.Join(ctr, "sub-1.ctr"), os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close()
		}
	})

	once := newMdbus(bin, ctr, "stat-once", "stat", "--once", "--dir", ctr)
	start := time.Now()
	once.start(t)
	require.Equal(t, 0, once.wait(t, 5*time.Second))
	took := time.Since(start)
	out := once.out()
	t.Logf("mdbus stat --once (%v):\n%s", took, out)
	require.Less(t, took, time.Second+300*time.Millisecond, "--once samples for 200 ms; the rest is start-up")
	require.Regexp(t, `(?m)^pub +\d+ running `, out)
	require.Regexp(t, `(?m)^sub +1 skipped +counters: not a regular file: a FIFO`, out)
	require.Regexp(t, `(?m)^sub +2 skipped +counters: not a regular file: a symbolic link`, out)

	live := newMdbus(bin, ctr, "stat-live", "stat", "--interval", "100ms", "--dir", ctr)
	live.start(t)
	poll(10*time.Second, func() bool { return strings.Contains(live.out(), "skipped") })
	require.NoError(t, live.cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(t, 0, live.wait(t, time.Second), "SIGTERM ends the live view")
	require.Contains(t, live.out(), "skipped")

	require.NoError(t, pub.cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(t, 0, pub.wait(t, 20*time.Second))
}
