package counters

import (
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/common/expfmt"
)

// WritePrometheus writes s in the Prometheus text exposition format
// (version 0.0.4): one family per kind, "mdbus_" + Kind.Name, with labels
// role, owner, stream (per-stream counters) and the kind's label key.
// Slots of KindCustom are named "mdbus_" + ROLE + "_" + their label; a
// label ending in "_ns" (a duration) becomes "_seconds", in seconds.
func WritePrometheus(w io.Writer, s Snapshot) error {
	type sample struct{ labels, value string }
	type family struct {
		help    string
		typ     Type
		samples []sample
	}
	fams := map[string]*family{}
	role := promName(s.Role)
	for _, v := range s.Values {
		name, help, typ := v.Kind.Name(), v.Kind.Help(), v.Type
		scale := kinds[v.Kind].scale
		if name == "" {
			name, help = role+"_"+promName(v.Label), v.Label
			if base, ok := strings.CutSuffix(name, "_ns"); ok { // a duration (AttachStruct): base unit seconds
				name, scale = base+"_seconds", 1e-9
			}
			if typ == Counter && !strings.HasSuffix(name, "_total") {
				name += "_total"
			}
		}
		name = "mdbus_" + name
		f := fams[name]
		if f == nil {
			f = &family{help: help, typ: typ}
			fams[name] = f
		}
		if f.typ != typ {
			continue // one type per family: a hostile or mixed file loses the odd one
		}
		owner, stream, _ := strings.Cut(v.Owner, "/")
		var lb strings.Builder
		fmt.Fprintf(&lb, `role=%q,owner=%q`, promLabel(s.Role), promLabel(owner))
		if stream != "" {
			fmt.Fprintf(&lb, `,stream=%q`, promLabel(stream))
		}
		if k := v.Kind.LabelKey(); k != "" {
			fmt.Fprintf(&lb, `,%s=%q`, k, promLabel(v.Label))
		}
		val := fmt.Sprint(v.Value)
		if scale != 0 {
			val = strconv.FormatFloat(float64(v.Value)*scale, 'g', -1, 64)
		}
		f.samples = append(f.samples, sample{lb.String(), val})
	}
	names := make([]string, 0, len(fams))
	for n := range fams {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		f := fams[n]
		sort.Slice(f.samples, func(i, j int) bool { return f.samples[i].labels < f.samples[j].labels })
		if _, err := fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", n, promHelp(f.help), n, f.typ); err != nil {
			return err
		}
		last := ""
		for _, sm := range f.samples {
			if sm.labels == last {
				continue // a duplicate series is invalid exposition
			}
			last = sm.labels
			if _, err := fmt.Fprintf(w, "%s{%s} %s\n", n, sm.labels, sm.value); err != nil {
				return err
			}
		}
	}
	return nil
}

// promName maps s to [a-zA-Z0-9_], lower case.
func promName(s string) string {
	b := []byte(strings.ToLower(s))
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			b[i] = '_'
		}
	}
	if len(b) == 0 || b[0] >= '0' && b[0] <= '9' {
		b = append([]byte{'x'}, b...)
	}
	return string(b)
}

// promLabel keeps a label value printable ASCII (%q then escapes it as
// Prometheus wants: backslash, quote, newline).
func promLabel(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e {
			return '?'
		}
		return r
	}, s)
}

func promHelp(s string) string {
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`).Replace(promLabel(s))
}

// Handler serves f's counters in the Prometheus text format, plus the Go
// runtime and process metrics (go_*, process_*) of client_golang's
// collectors. It reads the slots when scraped: nothing on the hot path.
func Handler(f *File) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
		if err := WritePrometheus(w, f.Snapshot()); err != nil {
			return // the scraper went away
		}
		mfs, err := reg.Gather()
		if err != nil {
			fmt.Fprintf(w, "# runtime metrics: %v\n", err)
		}
		for _, mf := range mfs {
			if _, err := expfmt.MetricFamilyToText(w, mf); err != nil {
				return
			}
		}
	})
}
