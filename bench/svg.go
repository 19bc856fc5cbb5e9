package bench

import (
	"bufio"
	"errors"
	"fmt"
	"html"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// ChartSeries is one line of a percentile-spectrum chart.
type ChartSeries struct {
	Name   string
	Points []Point // value in ns at each quantile (0-100)
}

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"}

// WriteChart draws series as an SVG percentile spectrum, the plot
// HdrHistogram's plotter makes: the x axis is "1 in N" (1/(1-quantile)) on a
// log scale, so the median, p90, p99, p99.9 ... are evenly spaced, and the
// y axis is latency in microseconds, also on a log scale.
func WriteChart(w io.Writer, title string, series []ChartSeries) error {
	const (
		width                    = 960
		plotHeight               = 440
		left, right, top, bottom = 80, 56, 48, 64
		legendRow                = 18
	)
	height := top + plotHeight + bottom + legendRow*len(series) + 8
	plotW, plotH := float64(width-left-right), float64(plotHeight)
	minV, maxV, maxX := math.Inf(1), 0.0, 10.0
	for _, s := range series {
		for _, p := range s.Points {
			if p.V > 0 {
				minV = math.Min(minV, float64(p.V)/1e3)
				maxV = math.Max(maxV, float64(p.V)/1e3)
			}
			if p.Q < 100 {
				maxX = math.Max(maxX, 1/(1-p.Q/100))
			}
		}
	}
	if maxV == 0 {
		minV, maxV = 1, 10
	}
	y0 := math.Floor(math.Log10(minV))
	y1 := math.Ceil(math.Log10(maxV))
	if y1 <= y0 {
		y1 = y0 + 1
	}
	x1 := math.Ceil(math.Log10(maxX))
	if x1 < 1 {
		x1 = 1
	}
	xOf := func(q float64) float64 {
		inv := maxX * 10
		if q < 100 {
			inv = 1 / (1 - q/100)
		}
		return float64(left) + math.Min(math.Log10(inv)/x1, 1)*plotW
	}
	yOf := func(us float64) float64 {
		if us <= 0 {
			us = math.Pow(10, y0)
		}
		return float64(top) + plotH - (math.Log10(us)-y0)/(y1-y0)*plotH
	}
	bw := bufio.NewWriter(w)
	svgStart(bw, width, height, left, title)
	// Grid and axes.
	for k := 0.0; k <= x1; k++ {
		x := float64(left) + k/x1*plotW
		label := nines(int(k))
		fmt.Fprintf(bw, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", x, top, x, float64(top)+plotH)
		fmt.Fprintf(bw, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", x, float64(top)+plotH+16, label)
		fmt.Fprintf(bw, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="#888">1 in %s</text>`+"\n", x, float64(top)+plotH+30, strconv.FormatFloat(math.Pow(10, k), 'f', 0, 64))
	}
	for e := y0; e <= y1; e++ {
		for _, m := range []float64{1, 2, 5} {
			v := m * math.Pow(10, e)
			if math.Log10(v) > y1+1e-9 {
				break
			}
			y := yOf(v)
			stroke := "#eee"
			if m == 1 {
				stroke = "#ccc"
			}
			fmt.Fprintf(bw, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s"/>`+"\n", left, y, float64(left)+plotW, y, stroke)
			fmt.Fprintf(bw, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", left-6, y+4, micros(v))
		}
	}
	fmt.Fprintf(bw, `<rect x="%d" y="%d" width="%.1f" height="%.1f" fill="none" stroke="#444"/>`+"\n", left, top, plotW, plotH)
	fmt.Fprintf(bw, `<text x="%.1f" y="%.1f" text-anchor="middle">percentile (log scale of 1 in N)</text>`+"\n", float64(left)+plotW/2, float64(top)+plotH+48)
	fmt.Fprintf(bw, `<text transform="translate(18 %.1f) rotate(-90)" text-anchor="middle">latency (log scale)</text>`+"\n", float64(top)+plotH/2)
	// Series.
	for i, s := range series {
		xy := make([][2]float64, len(s.Points))
		for j, p := range s.Points {
			xy[j] = [2]float64{xOf(p.Q), yOf(float64(p.V) / 1e3)}
		}
		svgSeries(bw, i, s.Name, xy, false, left, top+plotHeight+bottom+4+legendRow*i)
	}
	fmt.Fprintln(bw, "</svg>")
	return bw.Flush()
}

// svgStart writes the SVG header, a white background and the title: its
// first line large, a second line (after a newline: the run's context)
// smaller, below it.
func svgStart(bw *bufio.Writer, width, height, left int, title string) {
	head, sub, _ := strings.Cut(title, "\n")
	fmt.Fprintf(bw, `<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">
<rect width="100%%" height="100%%" fill="white"/>
<text x="%d" y="20" font-size="16">%s</text>
`, width, height, width, height, left, html.EscapeString(head))
	if sub != "" {
		fmt.Fprintf(bw, `<text x="%d" y="38" fill="#444">%s</text>`+"\n", left, html.EscapeString(strings.ReplaceAll(sub, "\n", "; ")))
	}
}

// svgSeries draws series i as a line through xy (plot coordinates), with
// dots when marks, and its legend entry at (left, ly).
func svgSeries(bw *bufio.Writer, i int, name string, xy [][2]float64, marks bool, left, ly int) {
	color := palette[i%len(palette)]
	var b strings.Builder
	for j, p := range xy {
		cmd := "L"
		if j == 0 {
			cmd = "M"
		}
		fmt.Fprintf(&b, "%s%.1f %.1f ", cmd, p[0], p[1])
	}
	if b.Len() > 0 {
		fmt.Fprintf(bw, `<path d="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", strings.TrimSpace(b.String()), color)
	}
	for _, p := range xy {
		if marks {
			fmt.Fprintf(bw, `<circle cx="%.1f" cy="%.1f" r="4" fill="%s"/>`+"\n", p[0], p[1], color)
		}
	}
	fmt.Fprintf(bw, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="3"/>`+"\n", left, ly-4, left+24, ly-4, color)
	fmt.Fprintf(bw, `<text x="%d" y="%d">%s</text>`+"\n", left+30, ly, html.EscapeString(name))
}

// WriteCapacityChart draws capacity (messages/s, log scale) by message
// size (log scale), one line per system, packet size and subscriber
// count, from the fixed-size results of capa.
func WriteCapacityChart(w io.Writer, title string, capa []CapacityResult) error {
	const (
		width                    = 960
		plotHeight               = 440
		left, right, top, bottom = 80, 56, 48, 56
		legendRow                = 18
	)
	type line struct {
		name string
		pts  [][2]float64 // size, msgs/s
	}
	var lines []*line
	byName := map[string]*line{}
	minS, maxS, minV, maxV := math.Inf(1), 0.0, math.Inf(1), 0.0
	for _, c := range capa {
		size, err := strconv.Atoi(c.Size)
		if err != nil || c.Capacity <= 0 {
			continue // a distribution, or nothing lossless
		}
		name := fmt.Sprintf("%s, 1->%d", c.System, c.Subscribers)
		if c.System != Raw {
			name = fmt.Sprintf("%s in %d B packets, 1->%d", c.System, c.PayloadSize, c.Subscribers)
		}
		l := byName[name]
		if l == nil {
			l = &line{name: name}
			byName[name] = l
			lines = append(lines, l)
		}
		l.pts = append(l.pts, [2]float64{float64(size), c.Capacity})
		minS, maxS = math.Min(minS, float64(size)), math.Max(maxS, float64(size))
		minV, maxV = math.Min(minV, c.Capacity), math.Max(maxV, c.Capacity)
	}
	if len(lines) == 0 {
		minS, maxS, minV, maxV = 16, 1024, 1e3, 1e6
	}
	x0, x1 := math.Floor(math.Log2(minS)), math.Ceil(math.Log2(maxS))
	if x1 <= x0 {
		x0, x1 = x0-1, x1+1
	}
	y0, y1 := math.Floor(math.Log10(minV)), math.Ceil(math.Log10(maxV))
	if y1 <= y0 {
		y1 = y0 + 1
	}
	height := top + plotHeight + bottom + legendRow*len(lines) + 8
	plotW, plotH := float64(width-left-right), float64(plotHeight)
	xOf := func(s float64) float64 { return float64(left) + (math.Log2(s)-x0)/(x1-x0)*plotW }
	yOf := func(v float64) float64 { return float64(top) + plotH - (math.Log10(v)-y0)/(y1-y0)*plotH }
	bw := bufio.NewWriter(w)
	svgStart(bw, width, height, left, title)
	for k := x0; k <= x1; k++ {
		x := xOf(math.Pow(2, k))
		fmt.Fprintf(bw, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", x, top, x, float64(top)+plotH)
		fmt.Fprintf(bw, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", x, float64(top)+plotH+16, strconv.FormatFloat(math.Pow(2, k), 'f', 0, 64))
	}
	for e := y0; e <= y1; e++ {
		for _, m := range []float64{1, 2, 5} {
			v := m * math.Pow(10, e)
			if math.Log10(v) > y1+1e-9 {
				break
			}
			stroke := "#eee"
			if m == 1 {
				stroke = "#ccc"
			}
			fmt.Fprintf(bw, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s"/>`+"\n", left, yOf(v), float64(left)+plotW, yOf(v), stroke)
			fmt.Fprintf(bw, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", left-6, yOf(v)+4, rateName(v))
		}
	}
	fmt.Fprintf(bw, `<rect x="%d" y="%d" width="%.1f" height="%.1f" fill="none" stroke="#444"/>`+"\n", left, top, plotW, plotH)
	fmt.Fprintf(bw, `<text x="%.1f" y="%.1f" text-anchor="middle">message size, bytes (log scale)</text>`+"\n", float64(left)+plotW/2, float64(top)+plotH+36)
	fmt.Fprintf(bw, `<text transform="translate(18 %.1f) rotate(-90)" text-anchor="middle">lossless capacity, msgs/s (log scale)</text>`+"\n", float64(top)+plotH/2)
	for i, l := range lines {
		sort.Slice(l.pts, func(a, b int) bool { return l.pts[a][0] < l.pts[b][0] })
		xy := make([][2]float64, len(l.pts))
		for j, p := range l.pts {
			xy[j] = [2]float64{xOf(p[0]), yOf(p[1])}
		}
		svgSeries(bw, i, l.name, xy, true, left, top+plotHeight+bottom+4+legendRow*i)
	}
	fmt.Fprintln(bw, "</svg>")
	return bw.Flush()
}

// nines labels the k-th decade of the x axis: 0%, 90%, 99%, 99.9% ...
func nines(k int) string {
	switch k {
	case 0:
		return "0%"
	case 1:
		return "90%"
	}
	if k == 2 {
		return "99%"
	}
	return "99." + strings.Repeat("9", k-2) + "%"
}

// micros labels a latency given in microseconds: 500µs, 2ms, 1.5s.
func micros(v float64) string {
	f := func(x float64) string { return strconv.FormatFloat(x, 'g', 3, 64) }
	switch {
	case v >= 1e6:
		return f(v/1e6) + "s"
	case v >= 1e3:
		return f(v/1e3) + "ms"
	case v >= 1:
		return f(v) + "µs"
	}
	return f(v*1e3) + "ns"
}

// LoadChartSeries reads the latency series of a JSON report or a .hgrm
// file (as this package writes them: values in microseconds).
func LoadChartSeries(path string) ([]ChartSeries, error) {
	base := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	switch strings.ToLower(filepath.Ext(path)) {
	case ".json":
		r, err := LoadReport(path)
		if err != nil {
			return nil, err
		}
		var out []ChartSeries
		for _, l := range r.Latency {
			if len(l.Spectrum) > 0 {
				out = append(out, ChartSeries{Name: fmt.Sprintf("%s: %s (n %s)", base, l.Name, count(float64(l.Total.Count))), Points: l.Spectrum})
			}
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("bench: %s: no latency spectra in the report", path)
		}
		return out, nil
	case ".hgrm":
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		pts, err := ParseHGRM(f, 1e3)
		if err != nil {
			return nil, fmt.Errorf("bench: %s: %w", path, err)
		}
		return []ChartSeries{{Name: base, Points: pts}}, nil
	}
	return nil, fmt.Errorf("%w: %s: want a .json report or a .hgrm file", ErrConfig, path)
}

// ParseHGRM reads the rows of a PercentilesPrint output. Values are
// multiplied by toNs (1e3 for files in microseconds) to give nanoseconds.
func ParseHGRM(r io.Reader, toNs float64) ([]Point, error) {
	var pts []Point
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 4 || strings.HasPrefix(f[0], "#") {
			continue
		}
		v, err1 := strconv.ParseFloat(f[0], 64)
		q, err2 := strconv.ParseFloat(f[1], 64)
		if err1 != nil || err2 != nil {
			continue
		}
		pts = append(pts, Point{Q: q * 100, V: int64(math.Round(v * toNs))})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(pts) == 0 {
		return nil, errors.New("no percentile rows (not a .hgrm file?)")
	}
	return pts, nil
}
