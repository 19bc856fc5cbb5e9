package statsd

import (
	"bufio"
	"fmt"
	"math"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// etsy runs etsy's statsd server (npm statsd@0.9.0) with its own graphite
// backend pointed at a TCP listener of the test: each flush arrives as
// one connection of Graphite plaintext lines.
type etsy struct {
	udp     netip.AddrPort
	flushes chan map[string]float64
	cmd     *exec.Cmd
	ln      net.Listener
	wg      sync.WaitGroup
	out     strings.Builder
}

func startEtsy(t *testing.T, modules string, flush time.Duration, port, mgmt int) *etsy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	e := &etsy{udp: netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(port)), flushes: make(chan map[string]float64, 64), ln: ln}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			vals := map[string]float64{}
			sc := bufio.NewScanner(c)
			for sc.Scan() {
				f := strings.Fields(sc.Text())
				if len(f) == 3 {
					v, _ := strconv.ParseFloat(f[1], 64)
					vals[f[0]] = v
				}
			}
			c.Close()
			select {
			case e.flushes <- vals:
			default:
			}
		}
	}()
	cfg := fmt.Sprintf(`{ port: %d, address: "127.0.0.1", mgmt_port: %d, mgmt_address: "127.0.0.1", flushInterval: %d,
  backends: ["./backends/graphite"], graphiteHost: "127.0.0.1", graphitePort: %d,
  graphite: { legacyNamespace: false }, deleteIdleStats: true, percentThreshold: [90] }`,
		port, mgmt, flush.Milliseconds(), ln.Addr().(*net.TCPAddr).Port)
	path := filepath.Join(t.TempDir(), "config.js")
	require.NoError(t, os.WriteFile(path, []byte(cfg), 0o644))
	e.cmd = exec.Command("node", "stats.js", path)
	e.cmd.Dir = filepath.Join(modules, "statsd")
	e.cmd.Stdout, e.cmd.Stderr = &e.out, &e.out
	require.NoError(t, e.cmd.Start())
	t.Cleanup(func() {
		e.cmd.Process.Kill()
		e.cmd.Wait()
		ln.Close()
		e.wg.Wait()
		if t.Failed() {
			t.Logf("etsy statsd output:\n%s", e.out.String())
		}
	})
	return e
}

// next waits for etsy's next flush.
func (e *etsy) next(t *testing.T, timeout time.Duration) map[string]float64 {
	t.Helper()
	select {
	case f := <-e.flushes:
		return f
	case <-time.After(timeout):
		t.Fatalf("etsy statsd sent no flush in %v", timeout)
		return nil
	}
}

// etsyLines are the lines of one agreement round: counters with sample
// rates, gauges set and moved by deltas, sets with repeated members,
// timers with and without sample rates, and etsy's multi-metric form.
func etsyLines(p string) []string {
	var l []string
	for range 50 {
		l = append(l, p+"c1:1|c")
	}
	for range 20 {
		l = append(l, p+"c2:3|c|@0.5")
	}
	for range 5 {
		l = append(l, p+"c3:-2.5|c")
	}
	l = append(l, p+"g1:10|g", p+"g1:+5|g", p+"g1:-3|g", p+"g2:7|g", p+"g2:-10|g", p+"g3:+4|g")
	for i := range 30 {
		l = append(l, fmt.Sprintf("%ss1:member%d|s", p, i%10))
	}
	for i := range 100 {
		l = append(l, fmt.Sprintf("%st1:%d|ms", p, 1+(i*37)%100))
	}
	for i := range 40 {
		l = append(l, fmt.Sprintf("%st2:%g|ms|@0.25", p, 0.5+float64((i*13)%40)))
	}
	l = append(l, p+"m:1|c:5|ms", p+"m2:2|c|@0.5:7|ms")
	return l
}

// TestEtsyAgreement is acceptance 2: etsy's server and mdbus, fed the
// same datagrams, report the same counters, rates, gauges (with deltas),
// set sizes and timer count, count_ps, sum, mean, upper, lower and
// upper_90.
func TestEtsyAgreement(t *testing.T) {
	modules := requireNode(t)
	const flush = 2 * time.Second
	rec := newRecorder()
	p := newPipeline(t, pipeOpts{flush: flush, collector: func(c *CollectorConfig) {
		c.DeleteIdle = true
		c.Percentiles = []float64{90}
		c.HistDigits = 3
		c.Backends = append(c.Backends, rec)
	}})
	e := startEtsy(t, modules, flush, 18125, 18126)
	e.next(t, 20*time.Second) // etsy is up; its next flush is one interval away
	toEtsy := udpSender(t, e.udp)
	toRelay := udpSender(t, p.relay.Addr())
	for round := range 4 {
		prefix := fmt.Sprintf("agree%d.", round)
		lines := etsyLines(prefix)
		for i := 0; i < len(lines); i += 10 {
			d := []byte(strings.Join(lines[i:min(i+10, len(lines))], "\n"))
			_, err := toEtsy.Write(d)
			require.NoError(t, err)
			_, err = toRelay.Write(d)
			require.NoError(t, err)
		}
		ef := e.next(t, 2*flush)
		ef2 := e.next(t, 2*flush) // must not hold this round's keys
		ours := ourGraphite(t, rec, prefix, 3*flush)
		if straddled(ef2, prefix) || ours == nil {
			t.Logf("round %d straddled a flush boundary; again", round)
			continue
		}
		etsyVals := map[string]float64{}
		for k, v := range ef {
			if strings.Contains(k, "."+prefix) {
				etsyVals[k] = v
			}
		}
		compared := 0
		for k, want := range etsyVals {
			if strings.HasPrefix(k, "stats.timers.") && !isComparedTimerStat(k) {
				continue
			}
			got, ok := ours[k]
			require.True(t, ok, "mdbus has no %s (etsy %v)\nours: %v", k, want, fmtMap(ours))
			tol := math.Abs(want) * 1e-9
			if strings.HasSuffix(k, ".upper_90") {
				tol = math.Abs(want) * 1e-3 // the histogram's precision
			}
			require.InDelta(t, want, got, tol, k)
			compared++
		}
		t.Logf("round %d: %d values agree, e.g. %s=%v %s=%v", round, compared,
			"stats.timers."+prefix+"t2.count", etsyVals["stats.timers."+prefix+"t2.count"],
			"stats.gauges."+prefix+"g2", etsyVals["stats.gauges."+prefix+"g2"])
		require.GreaterOrEqual(t, compared, 30)
		return
	}
	t.Fatal("every round straddled a flush boundary")
}

func isComparedTimerStat(k string) bool {
	for _, s := range []string{".count", ".count_ps", ".sum", ".mean", ".upper", ".lower", ".upper_90"} {
		if strings.HasSuffix(k, s) {
			return true
		}
	}
	return false
}

func straddled(f map[string]float64, prefix string) bool {
	for k := range f {
		if strings.Contains(k, "."+prefix) {
			return true
		}
	}
	return false
}

// ourGraphite waits until the collector has flushed an interval with
// the round's metrics and one after it, and returns the first rendered
// by GraphiteWriter, or nil if the round's metrics span two intervals.
func ourGraphite(t *testing.T, rec *recorder, prefix string, timeout time.Duration) map[string]float64 {
	t.Helper()
	var hits []*Flush
	done := poll(timeout, func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		hits = hits[:0]
		after := false
		for _, f := range rec.flushes {
			has := false
			for _, s := range f.Series {
				if strings.HasPrefix(s.Name, prefix) {
					has = true
				}
			}
			if has {
				hits = append(hits, f)
			} else if len(hits) > 0 {
				after = true
			}
		}
		return len(hits) > 1 || len(hits) == 1 && after
	})
	if !done {
		t.Fatalf("the collector flushed no interval with %s* in %v", prefix, timeout)
	}
	if len(hits) > 1 {
		return nil
	}
	var b strings.Builder
	require.NoError(t, (&GraphiteWriter{W: &b}).WriteFlush(hits[0]))
	vals := map[string]float64{}
	for _, line := range strings.Split(b.String(), "\n") {
		if f := strings.Fields(line); len(f) == 3 {
			v, _ := strconv.ParseFloat(f[1], 64)
			vals[f[0]] = v
		}
	}
	return vals
}
