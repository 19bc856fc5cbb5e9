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
	"unicode/utf8"
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
		if r, ok := rawGSOCapacity(capa, m); ok && r.BytesPerSec > 0 && m.BytesPerSec > 0 {
			out = append(out, Ratio{What: "capacity " + m.Name + ": bytes/s vs raw-gso", Mdbus: m.BytesPerSec, Raw: r.BytesPerSec, Ratio: ratio(m.BytesPerSec, r.BytesPerSec)})
		}
		if l, ok := losslessCapacity(capa, m); ok && l.Capacity > 0 && m.Capacity > 0 {
			// Raw is the lossless cell here: the ratio is what loss keeps.
			out = append(out, Ratio{What: "capacity " + m.Name + ": msgs/s vs lossless", Mdbus: m.Capacity, Raw: l.Capacity, Ratio: ratio(m.Capacity, l.Capacity)})
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

// losslessCapacity finds the lossless mdbus result of the same shape as
// the lossy m (false when m is not lossy).
func losslessCapacity(capa []CapacityResult, m CapacityResult) (CapacityResult, bool) {
	if m.System != Mdbus || m.Loss == 0 {
		return CapacityResult{}, false
	}
	for _, r := range capa {
		if r.System == Mdbus && r.Loss == 0 && r.Size == m.Size && r.PayloadSize == m.PayloadSize &&
			r.Subscribers == m.Subscribers && r.Processes == m.Processes && r.Probe == m.Probe {
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
	var samples int64
	for _, l := range b.rep.Latency {
		if len(l.Spectrum) > 0 {
			series = append(series, ChartSeries{Name: fmt.Sprintf("%s (n %s; p50 %s, p99.9 %s, max %s µs)", l.Name, count(float64(l.Total.Count)),
				us(l.Total.P50), us(l.Total.P999), us(l.Total.Max)), Points: l.Spectrum})
			samples += l.Total.Count
		}
	}
	if len(series) > 0 {
		var buf bytes.Buffer
		title := fmt.Sprintf("mdbus bench %s: latency by percentile, %s samples in %d series\n%s", b.rep.Command, count(float64(samples)), len(series), chartContext(&b.rep))
		if err := WriteChart(&buf, title, series); err != nil {
			errs = append(errs, err)
		} else {
			write(name+".svg", buf.Bytes())
		}
	}
	if len(b.rep.Capacity) > 0 {
		var buf bytes.Buffer
		probes := 0
		for _, c := range b.rep.Capacity {
			probes += len(c.Probes)
		}
		c0 := b.rep.Capacity[0]
		title := fmt.Sprintf("mdbus bench: lossless capacity by message size, %d cells, %d probes of %gs to %g%%\n%s",
			len(b.rep.Capacity), probes, c0.Probe, c0.Resolution*100, chartContext(&b.rep))
		if err := WriteCapacityChart(&buf, title, b.rep.Capacity); err != nil {
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

// chartContext is the run context a chart's subtitle carries: offered
// rates and message sizes of the latency runs, run length, payload,
// host, start time and load.
func chartContext(r *Report) string {
	var rates, sizes []string
	seen := map[string]bool{}
	for _, l := range r.Latency {
		rn := rateName(l.Rate) + "/s"
		if l.Mode == PingPong {
			rn = "closed loop"
		}
		if !seen["r"+rn] {
			seen["r"+rn] = true
			rates = append(rates, rn)
		}
		if !seen["s"+l.Size] {
			seen["s"+l.Size] = true
			sizes = append(sizes, l.Size+"B")
		}
	}
	var parts []string
	if len(rates) > 0 {
		parts = append(parts, "rate "+strings.Join(rates, ", "), "size "+strings.Join(sizes, ", "))
	}
	host, _ := os.Hostname()
	parts = append(parts, fmt.Sprintf("run %gs", r.Settings.Duration), fmt.Sprintf("payload %d B", r.Settings.PayloadSize),
		fmt.Sprintf("host %s (%s, %d cores, load %.2f)", host, r.Machine.CPU, r.Machine.Cores, r.Machine.LoadStart),
		r.Started.UTC().Format("2006-01-02 15:04 UTC"))
	return strings.Join(parts, "; ")
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
	if s.Path == PathVeth {
		s.Interface, s.TTL = "veth (sender and receivers in two lab namespaces, through a bridge)", 1
	}
	fmt.Fprintf(&buf, "interface %s, TTL %d, payload %d B, batch %d, linger %v (throughput), socket buffers %d/%d B, run %gs",
		s.Interface, s.TTL, s.PayloadSize, s.Batch, time.Duration(s.Linger*1e9), s.ReadBuffer, s.WriteBuffer, s.Duration)
	if s.Count > 0 {
		fmt.Fprintf(&buf, " or %d messages", s.Count)
	}
	fmt.Fprintf(&buf, ", warm-up %gs", s.Warmup)
	if s.SubProcs > 0 || s.PubProcs > 0 {
		fmt.Fprintf(&buf, ",\n    Go processors with subscriber processes: %s each, %s on the publisher's side", procsName(s.SubProcs), procsName(s.PubProcs))
	}
	fmt.Fprintln(&buf)
	if r.Interrupted {
		fmt.Fprintln(&buf, "INTERRUPTED: the figures cover what was measured before the interrupt.")
	}
	// Tables: each run's name on a line of its own, then its rows in
	// fixed-width columns, so that a long name never widens the table.
	if len(r.Throughput) > 0 {
		fmt.Fprintln(&buf, "\nThroughput (one publisher; one row per subscriber; MB = 10^6 bytes of messages)")
		const row = "  %-6s %11s %7s %11s %6s %6s %7s %6s %8s %6s %7s %5s %13s\n"
		fmt.Fprintf(&buf, row, "", "msgs/s", "MB/s", "pkts/s", "m/pkt", "rcvMiB", "kdrops", "gaps", "repairs", "lost", "missing", "whole", "p50/p99.9 µs")
		for _, t := range r.Throughput {
			fmt.Fprintln(&buf, t.Name)
			lat := "-"
			if t.Latency != nil {
				lat = us(t.Latency.P50) + "/" + us(t.Latency.P999)
			}
			fmt.Fprintf(&buf, row, "sent", count(t.Sent.MsgsPerSec), fmt.Sprintf("%.1f", t.Sent.BytesPerSec/1e6), count(t.Sent.PacketsPerSec),
				fmt.Sprintf("%.1f", t.Sent.MsgsPerPacket), "", "", "", "", "", "", "", "")
			for _, sr := range t.Subs {
				fmt.Fprintf(&buf, row, sr.Name, count(sr.MsgsPerSec), fmt.Sprintf("%.1f", sr.BytesPerSec/1e6), count(sr.PacketsPerSec),
					fmt.Sprintf("%.1f", sr.MsgsPerPacket), fmt.Sprintf("%.0f", float64(sr.ReadBuffer)/(1<<20)), fmt.Sprint(sr.KernelDrops),
					fmt.Sprint(sr.Gaps), fmt.Sprint(sr.Repairs), fmt.Sprint(sr.Lost), fmt.Sprint(sr.Missing), yes(sr.Complete), lat)
			}
			if l := cpuLine(t); l != "" {
				fmt.Fprintln(&buf, l)
			}
			if t.Recovery != nil {
				p := t.Recovery
				fmt.Fprintf(&buf, "  recovery, gap found to repaired over %d gaps: p50 %s, p99 %s, max %s µs\n", p.Count, us(p.P50), us(p.P99), us(p.Max))
				for _, sr := range t.Subs {
					if sr.NAKs > 0 {
						fmt.Fprintf(&buf, "  %s: %s re-requests, %s retries (no answer within the retry interval), %s confirms \"later\", at most %s packets held\n",
							sr.Name, count(float64(sr.NAKs)), count(float64(sr.Retries)), count(float64(sr.ConfirmsLater)), count(float64(sr.HeldMax)))
						if sr.AnsweredP50 > 0 {
							fmt.Fprintf(&buf, "    asked once: re-request p50 %s, p99 %s µs after the gap; repair p50 %s, p99 %s µs after it\n",
								us(int64(sr.AskedP50*1e9)), us(int64(sr.AskedP99*1e9)), us(int64(sr.AnsweredP50*1e9)), us(int64(sr.AnsweredP99*1e9)))
						}
					}
				}
			}
			if t.Error != "" {
				fmt.Fprintf(&buf, "  error: %s\n", oneLine(t.Error))
			}
		}
	}
	if len(r.Latency) > 0 {
		fmt.Fprintln(&buf, "\nLatency (µs; one-way: scheduled send to delivery; round trip: scheduled ping to delivered pong;\nping-pong: ping sent to pong delivered, one in flight)")
		const row = "  %-28s %10s %10s %7s %8s %8s %8s %8s %8s %8s\n"
		fmt.Fprintf(&buf, row, "", "sent", "received", "lost", "p50", "p90", "p99", "p99.9", "p99.99", "max")
		for _, l := range r.Latency {
			fmt.Fprintln(&buf, l.Name)
			line := func(name string, p Percentiles) {
				fmt.Fprintf(&buf, row, name, fmt.Sprint(l.Sent), fmt.Sprint(l.Received), fmt.Sprint(l.Lost),
					us(p.P50), us(p.P90), us(p.P99), us(p.P999), us(p.P9999), us(p.Max))
			}
			line("total", l.Total)
			if l.Wire != nil {
				line("wire (send to kernel rx)", *l.Wire)
				line("receive path (kernel rx)", *l.RecvPath)
			}
			if l.Recovery != nil {
				line("recovery (gap to repaired)", *l.Recovery)
			}
			if cl := l.ClosedLoop; cl != nil {
				inl := ""
				if cl.PingInline != nil && cl.PongInline != nil {
					inl = fmt.Sprintf("; sent inline: pinger %.1f%%, ponger %.1f%%", 100**cl.PingInline, 100**cl.PongInline)
				}
				fmt.Fprintf(&buf, "  closed loop: %s round trips/s, CPU/wall: pinger %.2f, ponger %.2f; %d timeouts%s\n",
					count(cl.RoundTripsPerSec), cl.PingCPU, cl.PongCPU, cl.Timeouts, inl)
			}
			if l.Total.RangeErrors > 0 {
				fmt.Fprintf(&buf, "  %d values outside the histogram's range\n", l.Total.RangeErrors)
			}
			if l.Error != "" {
				fmt.Fprintf(&buf, "  error: %s\n", oneLine(l.Error))
			}
		}
	}
	if len(r.Capacity) > 0 {
		writeCapacity(&buf, r.Capacity)
	}
	if len(r.Ratios) > 0 {
		fmt.Fprintln(&buf, "\nmdbus / raw UDP, or / lossless where a line says so, same run (throughput: higher is better; latency: lower is better)")
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
		for _, g := range r.Goals {
			v := "FAIL"
			if g.Pass {
				v = "pass"
			}
			fmt.Fprintf(&buf, "%s  %s: target %s; measured %s", v, g.Name, g.Target, g.Measured)
			if g.Headroom > 0 {
				fmt.Fprintf(&buf, "; headroom %.2fx (capacity %s)", g.Headroom, count(g.Capacity))
			}
			buf.WriteByte('\n')
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&buf, "note: %s\n", n)
	}
	if len(r.Files) > 0 {
		fmt.Fprintf(&buf, "files: %s\n", strings.Join(r.Files, " "))
	}
	_, err := w.Write(wrap(buf.Bytes(), TableWidth))
	return err
}

// TableWidth is the widest line WriteTable writes: longer prose lines are
// wrapped, with the continuation indented.
const TableWidth = 120

// wrap trims trailing spaces and breaks every line longer than width (in
// runes) at its last ", " or "; " that fits (else its last space),
// continuing on a line indented by four spaces. A word longer than the
// width stays whole.
func wrap(b []byte, width int) []byte {
	var out bytes.Buffer
	for _, line := range strings.SplitAfter(string(b), "\n") {
		nl := strings.HasSuffix(line, "\n")
		line = strings.TrimRight(strings.TrimSuffix(line, "\n"), " ")
		indent := ""
		for utf8.RuneCountInString(line) > width {
			limit, n := len(line), 0
			for i := range line { // the byte index of rune width+1
				if n == width+1 {
					limit = i
					break
				}
				n++
			}
			// Prefer a break after ", " or "; " (a list item stays whole),
			// unless that leaves the line short.
			cut := max(strings.LastIndex(line[:limit], ", "), strings.LastIndex(line[:limit], "; ")) + 1
			if cut < len(indent)+width/2 {
				cut = strings.LastIndexByte(line[:limit], ' ')
			}
			if cut <= len(indent) { // a word longer than the width: whole, on its own
				next := strings.IndexByte(line[len(indent)+1:], ' ')
				if next < 0 {
					break
				}
				cut = len(indent) + 1 + next
			}
			out.WriteString(strings.TrimRight(line[:cut], " "))
			out.WriteByte('\n')
			indent = "    "
			line = indent + strings.TrimLeft(line[cut:], " ")
		}
		out.WriteString(line)
		if nl {
			out.WriteByte('\n')
		}
	}
	return out.Bytes()
}

// writeCapacity writes the capacity table, then each search's probes.
func writeCapacity(buf *bytes.Buffer, capa []CapacityResult) {
	c0 := capa[0]
	fmt.Fprintf(buf, "\nCapacity: the highest offered rate every subscriber received whole (zero kernel drops, zero lost, all delivered)\nfor %gs per probe, to %g%%; MB = 10^6 message bytes\n",
		c0.Probe, c0.Resolution*100)
	const row = "  %14s %8s %7s %10s %12s %-22s %6s %5s\n"
	fmt.Fprintf(buf, row, "capacity msg/s", "MB/s", "vs raw", "vs raw-gso", "failed at", "stopped", "probes", "s")
	for _, c := range capa {
		vs, vsGSO := "-", "-"
		if c.System == Mdbus {
			if r, ok := rawCapacity(capa, c); ok && r.Capacity > 0 {
				vs = fmt.Sprintf("%.2fx", ratio(c.Capacity, r.Capacity))
			}
			if r, ok := rawGSOCapacity(capa, c); ok && r.BytesPerSec > 0 {
				vsGSO = fmt.Sprintf("%.2fx", ratio(c.BytesPerSec, r.BytesPerSec))
			}
		}
		failed := "-"
		if c.Failed > 0 {
			failed = count(c.Failed)
		}
		fmt.Fprintln(buf, c.Name)
		fmt.Fprintf(buf, row, count(c.Capacity), fmt.Sprintf("%.1f", c.BytesPerSec/1e6), vs, vsGSO, failed, c.Limit, fmt.Sprint(len(c.Probes)), fmt.Sprintf("%.0f", c.Seconds))
	}
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
		if c.Interleaved {
			trail = append(trail, "probes taken in turn with the cells of the same shape")
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

// cpuLine says what CPU time each process of a throughput run spent per
// message sent (user + system, getrusage), or "" when nothing was sent:
// the bench's process (the publisher, its retransmitter and any goroutine
// subscribers) and each subscriber in a process of its own. On a host
// where they share the cores, what one spends the others lack.
func cpuLine(t ThroughputRun) string {
	if t.Sent.Messages == 0 || t.CPUSeconds <= 0 {
		return ""
	}
	per := func(secs float64) string {
		return fmt.Sprintf("%.0f ns (%.2f s)", secs*1e9/float64(t.Sent.Messages), secs)
	}
	var b strings.Builder
	who := "this process"
	if len(t.Subs) > 0 && t.Subs[0].CPUSeconds > 0 {
		who = "publisher process"
	}
	fmt.Fprintf(&b, "  CPU per message sent: %s %s", who, per(t.CPUSeconds))
	for _, sr := range t.Subs {
		if sr.CPUSeconds > 0 {
			fmt.Fprintf(&b, ", %s %s", sr.Name, per(sr.CPUSeconds))
		}
	}
	return b.String()
}

// procsName says a GOMAXPROCS setting of Settings: 0 is the Go runtime's
// default.
func procsName(n int) string {
	if n <= 0 {
		return "the Go default"
	}
	return fmt.Sprint(n)
}
