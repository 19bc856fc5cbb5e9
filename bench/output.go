package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"
)

// Finish closes the report: end time, load, interrupted flag and the
// mdbus/raw ratios of runs made in this Bench. Later runs are refused.
func (b *Bench) Finish(interrupted bool) *Report {
	if !b.finished {
		b.finished = true
		b.rep.Seconds = time.Since(b.rep.Started).Seconds()
		b.rep.Machine.LoadEnd = load1()
		b.rep.Ratios = ratios(b.rep.Throughput, b.rep.Latency, b.rep.Capacity)
	}
	b.rep.Interrupted = b.rep.Interrupted || interrupted
	return &b.rep
}

// Report returns the report so far (Finish completes it).
func (b *Bench) Report() *Report { return &b.rep }

// ratios pairs every mdbus run with the raw run of the same shape: same
// size, subscribers and processes (throughput; the same rate if there is
// one, else raw at full speed; capacity), same mode, size and rate
// (latency).
func ratios(tp []ThroughputRun, lat []LatencyRun, capa []CapacityResult) []Ratio {
	var out []Ratio
	for _, m := range capa {
		if m.System != Mdbus {
			continue
		}
		if r, ok := rawCapacity(capa, m); ok && r.Capacity > 0 && m.Capacity > 0 {
			out = append(out, Ratio{What: "capacity " + m.Name + ": msgs/s", Mdbus: m.Capacity, Raw: r.Capacity, Ratio: ratio(m.Capacity, r.Capacity)})
		}
	}
	for _, m := range tp {
		if m.System != Mdbus {
			continue
		}
		var best *ThroughputRun
		for i := range tp {
			r := &tp[i]
			if r.System != Raw || r.Size != m.Size || r.Subscribers != m.Subscribers || r.Processes != m.Processes {
				continue
			}
			if best == nil || r.Rate == m.Rate || (best.Rate != m.Rate && r.Rate == 0) {
				best = r
			}
		}
		if best == nil {
			continue
		}
		out = append(out,
			Ratio{What: m.Name + " / " + best.Name + ": msgs/s (slowest subscriber)", Mdbus: m.MinMsgsPerSec, Raw: best.MinMsgsPerSec, Ratio: ratio(m.MinMsgsPerSec, best.MinMsgsPerSec)},
		)
	}
	for _, m := range lat {
		if m.System != Mdbus {
			continue
		}
		for _, r := range lat {
			if r.System != Raw || r.Mode != m.Mode || r.Size != m.Size || r.Rate != m.Rate {
				continue
			}
			name := fmt.Sprintf("%s %sB %s/s", m.Mode, m.Size, rateName(m.Rate))
			if m.Mode == PingPong {
				name = fmt.Sprintf("%s %sB closed loop", m.Mode, m.Size)
			}
			if m.Loss > 0 {
				name += fmt.Sprintf(" (mdbus with %g%% loss)", m.Loss*100)
			}
			for _, q := range []struct {
				n    string
				a, b int64
			}{{"p50", m.Total.P50, r.Total.P50}, {"p99", m.Total.P99, r.Total.P99}, {"p99.9", m.Total.P999, r.Total.P999}} {
				out = append(out, Ratio{What: name + " latency " + q.n, Mdbus: float64(q.a), Raw: float64(q.b), Ratio: ratio(float64(q.a), float64(q.b))})
			}
			break
		}
	}
	return out
}

// rawCapacity finds the raw UDP result of the same shape as m.
func rawCapacity(capa []CapacityResult, m CapacityResult) (CapacityResult, bool) {
	for _, r := range capa {
		if r.System == Raw && r.Size == m.Size && r.Subscribers == m.Subscribers && r.Processes == m.Processes {
			return r, true
		}
	}
	return CapacityResult{}, false
}

// WriteFiles writes the run's files into dir, named name.json,
// name.hlog, name-SERIES.hgrm for each histogram series and, when there
// are latency runs, name.svg. It returns the paths written. The JSON
// lists the other files.
func (b *Bench) WriteFiles(dir, name string) ([]string, error) {
	if dir == "" {
		return nil, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("bench: output directory: %w", err)
	}
	var files []string
	var errs []error
	write := func(fname string, data []byte) {
		p := filepath.Join(dir, fname)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			errs = append(errs, fmt.Errorf("bench: write %s: %w", p, err))
			return
		}
		files = append(files, p)
	}
	for _, s := range b.coll.seriesNames() {
		h, _ := b.coll.total(s)
		var buf bytes.Buffer
		if _, err := h.PercentilesPrint(&buf, 5, 1e3); err != nil {
			errs = append(errs, err)
			continue
		}
		write(name+"-"+s+".hgrm", buf.Bytes())
	}
	if hl, err := b.coll.hlog(b.rep.Started); err != nil {
		errs = append(errs, err)
	} else {
		write(name+".hlog", hl)
	}
	var series []ChartSeries
	for _, l := range b.rep.Latency {
		if len(l.Spectrum) > 0 {
			series = append(series, ChartSeries{Name: fmt.Sprintf("%s (p50 %s, p99.9 %s, max %s µs)", l.Name, us(l.Total.P50), us(l.Total.P999), us(l.Total.Max)), Points: l.Spectrum})
		}
	}
	if len(series) > 0 {
		var buf bytes.Buffer
		if err := WriteChart(&buf, "mdbus bench: latency by percentile", series); err != nil {
			errs = append(errs, err)
		} else {
			write(name+".svg", buf.Bytes())
		}
	}
	if len(b.rep.Capacity) > 0 {
		var buf bytes.Buffer
		if err := WriteCapacityChart(&buf, "mdbus bench: lossless capacity by message size", b.rep.Capacity); err != nil {
			errs = append(errs, err)
		} else {
			write(name+"-capacity.svg", buf.Bytes())
		}
	}
	jsonPath := filepath.Join(dir, name+".json")
	b.rep.Files = append(append([]string(nil), files...), jsonPath)
	var js bytes.Buffer
	if err := b.WriteJSON(&js); err != nil {
		errs = append(errs, err)
	} else {
		write(name+".json", js.Bytes())
	}
	return files, errors.Join(errs...)
}

// LoadReport reads a report written by WriteFiles or WriteJSON.
func LoadReport(path string) (*Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("bench: %s: %w", path, err)
	}
	if r.Schema != Schema {
		return nil, fmt.Errorf("%w: %s: schema %q, want %q", ErrConfig, path, r.Schema, Schema)
	}
	return &r, nil
}

// WriteJSON writes the report as indented JSON.
func (b *Bench) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(&b.rep)
}

// WriteTable writes the report for people.
func (b *Bench) WriteTable(w io.Writer) error { return WriteTable(w, &b.rep) }

// WriteTable writes r as human-readable tables.
func WriteTable(w io.Writer, r *Report) error {
	var buf bytes.Buffer
	m := r.Machine
	fmt.Fprintf(&buf, "mdbus bench %s: %s, %d cores, Linux %s, %s; load %.2f -> %.2f; in lab: %v\n",
		r.Command, m.CPU, m.Cores, m.Kernel, m.GoVersion, m.LoadStart, m.LoadEnd, m.InLab)
	s := r.Settings
	fmt.Fprintf(&buf, "interface %s, TTL %d, payload %d B, batch %d, linger %v (throughput), socket buffers %d/%d B, run %gs",
		s.Interface, s.TTL, s.PayloadSize, s.Batch, time.Duration(s.Linger*1e9), s.ReadBuffer, s.WriteBuffer, s.Duration)
	if s.Count > 0 {
		fmt.Fprintf(&buf, " or %d messages", s.Count)
	}
	fmt.Fprintf(&buf, ", warm-up %gs\n", s.Warmup)
	if r.Interrupted {
		fmt.Fprintln(&buf, "INTERRUPTED: the figures cover what was measured before the interrupt.")
	}
	if len(r.Throughput) > 0 {
		fmt.Fprintln(&buf, "\nThroughput (one publisher; one row per subscriber; MB = 10^6 bytes of messages)")
		tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "run\tsub\tmsgs/s\tMB/s\tpkts/s\tmsgs/pkt\trcvbuf MiB\tkdrops\tgaps\trepairs\tlost\tmissing\tcomplete\tlat p50/p99.9 µs\t")
		for _, t := range r.Throughput {
			lat := "-"
			if t.Latency != nil {
				lat = us(t.Latency.P50) + "/" + us(t.Latency.P999)
			}
			fmt.Fprintf(tw, "%s\tsent\t%s\t%.1f\t%s\t%.1f\t\t\t\t\t\t\t\t\t\n", t.Name, count(t.Sent.MsgsPerSec), t.Sent.BytesPerSec/1e6, count(t.Sent.PacketsPerSec), t.Sent.MsgsPerPacket)
			for _, sr := range t.Subs {
				fmt.Fprintf(tw, "\t%s\t%s\t%.1f\t%s\t%.1f\t%.0f\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t\n", sr.Name, count(sr.MsgsPerSec), sr.BytesPerSec/1e6,
					count(sr.PacketsPerSec), sr.MsgsPerPacket, float64(sr.ReadBuffer)/(1<<20), sr.KernelDrops, sr.Gaps, sr.Repairs, sr.Lost, sr.Missing, yes(sr.Complete), lat)
			}
		}
		tw.Flush()
		for _, t := range r.Throughput {
			if t.Recovery != nil {
				p := t.Recovery
				fmt.Fprintf(&buf, "recovery, %s: gap found to repaired over %d gaps: p50 %s, p99 %s, max %s µs\n", t.Name, p.Count, us(p.P50), us(p.P99), us(p.Max))
			}
			if t.Error != "" {
				fmt.Fprintf(&buf, "error, %s: %s\n", t.Name, oneLine(t.Error))
			}
		}
	}
	if len(r.Latency) > 0 {
		fmt.Fprintln(&buf, "\nLatency (µs; one-way: scheduled send to delivery; round trip: scheduled ping to delivered pong; ping-pong: ping sent to pong delivered, one in flight)")
		tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "run\tsent\treceived\tlost\tp50\tp90\tp99\tp99.9\tp99.99\tmax\t")
		for _, l := range r.Latency {
			row := func(name string, p Percentiles) {
				fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t\n", name, l.Sent, l.Received, l.Lost,
					us(p.P50), us(p.P90), us(p.P99), us(p.P999), us(p.P9999), us(p.Max))
			}
			row(l.Name, l.Total)
			if l.Wire != nil {
				row("  wire (send to kernel rx)", *l.Wire)
				row("  receive path (kernel rx to app)", *l.RecvPath)
			}
			if l.Recovery != nil {
				row("  recovery (gap found to repaired)", *l.Recovery)
			}
			if cl := l.ClosedLoop; cl != nil {
				inl := ""
				if cl.PingInline != nil && cl.PongInline != nil {
					inl = fmt.Sprintf("; sent inline: pinger %.1f%%, ponger %.1f%%", 100**cl.PingInline, 100**cl.PongInline)
				}
				fmt.Fprintf(tw, "  closed loop: %s round trips/s, CPU/wall: pinger %.2f, ponger %.2f; %d timeouts%s\t\t\t\t\t\t\t\t\t\t\n",
					count(cl.RoundTripsPerSec), cl.PingCPU, cl.PongCPU, cl.Timeouts, inl)
			}
			if l.Total.RangeErrors > 0 {
				fmt.Fprintf(tw, "  %d values outside the histogram's range\t\t\t\t\t\t\t\t\t\t\n", l.Total.RangeErrors)
			}
			if l.Error != "" {
				fmt.Fprintf(tw, "  error: %s\t\t\t\t\t\t\t\t\t\t\n", oneLine(l.Error))
			}
		}
		tw.Flush()
	}
	if len(r.Capacity) > 0 {
		writeCapacity(&buf, r.Capacity)
	}
	if len(r.Ratios) > 0 {
		fmt.Fprintln(&buf, "\nmdbus / raw UDP, same run (throughput: higher is better; latency: lower is better)")
		tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', 0)
		for _, q := range r.Ratios {
			a, c := count(q.Mdbus), count(q.Raw)
			if strings.Contains(q.What, "latency") {
				a, c = us(int64(q.Mdbus))+" µs", us(int64(q.Raw))+" µs"
			}
			fmt.Fprintf(tw, "%s\t%s vs %s\t%.2fx\n", q.What, a, c, q.Ratio)
		}
		tw.Flush()
	}
	if len(r.Goals) > 0 {
		fmt.Fprintln(&buf, "\nGoals")
		tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', 0)
		for _, g := range r.Goals {
			v := "FAIL"
			if g.Pass {
				v = "pass"
			}
			room := "-"
			if g.Headroom > 0 {
				room = fmt.Sprintf("headroom %.2fx (capacity %s)", g.Headroom, count(g.Capacity))
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", v, g.Name, g.Target, g.Measured, room)
		}
		tw.Flush()
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&buf, "note: %s\n", n)
	}
	if len(r.Files) > 0 {
		fmt.Fprintf(&buf, "files: %s\n", strings.Join(r.Files, " "))
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// writeCapacity writes the capacity table, then each search's probes.
func writeCapacity(buf *bytes.Buffer, capa []CapacityResult) {
	c0 := capa[0]
	fmt.Fprintf(buf, "\nCapacity: the highest offered rate every subscriber received whole (zero kernel drops, zero lost, all delivered) for %gs per probe, to %g%%; MB = 10^6 message bytes\n",
		c0.Probe, c0.Resolution*100)
	tw := tabwriter.NewWriter(buf, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "run\tcapacity msgs/s\tMB/s\tvs raw\tfailed at\tstopped\tprobes\ts\t")
	for _, c := range capa {
		vs := "-"
		if c.System == Mdbus {
			if r, ok := rawCapacity(capa, c); ok && r.Capacity > 0 {
				vs = fmt.Sprintf("%.2fx", ratio(c.Capacity, r.Capacity))
			}
		}
		failed := "-"
		if c.Failed > 0 {
			failed = count(c.Failed)
		}
		fmt.Fprintf(tw, "%s\t%s\t%.1f\t%s\t%s\t%s\t%d\t%.0f\t\n", c.Name, count(c.Capacity), c.BytesPerSec/1e6, vs, failed, c.Limit, len(c.Probes), c.Seconds)
	}
	tw.Flush()
	for _, c := range capa {
		var trail []string
		for _, p := range c.Probes {
			v := "ok"
			if !p.Pass {
				v = p.Why
			}
			if p.Rate == 0 {
				trail = append(trail, fmt.Sprintf("free-running sent %s delivered %s (%s)", count(p.Sent), count(p.Delivered), v))
				continue
			}
			trail = append(trail, rateName(p.Rate)+" "+v)
		}
		fmt.Fprintf(buf, "probes, %s: %s\n", c.Name, strings.Join(trail, ", "))
		if c.Error != "" {
			fmt.Fprintf(buf, "error, %s: %s\n", c.Name, oneLine(c.Error))
		}
	}
}

// us formats nanoseconds as microseconds.
func us(ns int64) string {
	v := float64(ns) / 1e3
	switch {
	case v >= 1000:
		return fmt.Sprintf("%.0f", v)
	case v >= 100:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

// count formats a rate with thousands separators.
func count(v float64) string {
	n := int64(v + 0.5)
	s := fmt.Sprint(n)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func yes(b bool) string {
	if b {
		return "yes"
	}
	return "NO"
}

func oneLine(s string) string { return strings.ReplaceAll(s, "\n", "; ") }
