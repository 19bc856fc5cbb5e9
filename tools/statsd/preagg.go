package statsd

import (
	"math"
	"slices"
	"strconv"
	"time"
)

// preAgg is the relay's optional pre-aggregation: counters summed (sample
// rate applied) and gauges reduced to their net effect per name, tags and
// container, over a window. Other types pass through.
type preAgg struct {
	start time.Time
	byKey map[string]*preEntry
	keys  []string // in first-seen order, so output is deterministic
	key   []byte
}

type preEntry struct {
	name, tags, cont string
	typ              Type
	sum              float64 // counter sum, or gauge delta after the last set
	set              bool    // gauge: a value was set in the window
	val              float64 // the value set
}

// maxPreAggKeys bounds the names held over one pre-aggregation window.
const maxPreAggKeys = 100_000

func newPreAgg() *preAgg { return &preAgg{start: time.Now(), byKey: map[string]*preEntry{}} }

func (a *preAgg) due(w time.Duration) bool { return time.Since(a.start) >= w }

// add takes m if it is a counter or gauge; it reports whether it did. A
// metric that would take the entry's sum or value beyond ±MaxFloat64 is
// refused with ReasonNaNInf, the entry unchanged.
func (a *preAgg) add(m *Metric) (taken bool, r Reason) {
	if m.Type != TypeCounter && m.Type != TypeGauge {
		return false, ReasonNone
	}
	a.key = append(append(append(append(append(a.key[:0], m.Type.Code()...), 0), m.Name...), 0), m.Tags...)
	a.key = append(append(a.key, 0), m.Container...)
	e := a.byKey[string(a.key)]
	if e == nil && len(a.keys) >= maxPreAggKeys {
		return false, ReasonNone // a flood of new names passes through unaggregated
	}
	var next preEntry
	if e != nil {
		next = *e
	}
	for i := range m.N {
		v := m.Values[i]
		switch {
		case m.Type == TypeCounter:
			next.sum += v / m.Rate
		case m.Delta[i]:
			next.sum += v
		default:
			next.set, next.val, next.sum = true, v, 0
		}
	}
	if !finite(next.sum) || (next.set && !finite(next.val+next.sum)) {
		return false, ReasonNaNInf
	}
	if e == nil {
		e = &preEntry{name: string(m.Name), tags: string(m.Tags), cont: string(m.Container), typ: m.Type}
		k := string(a.key)
		a.byKey[k] = e
		a.keys = append(a.keys, k)
	}
	e.sum, e.set, e.val = next.sum, next.set, next.val
	return true, ReasonNone
}

// finite reports whether v is neither infinite nor NaN.
func finite(v float64) bool { return !math.IsInf(v, 0) && !math.IsNaN(v) }

// emit writes the window's lines into b and starts a new window.
func (a *preAgg) emit(b *builder) {
	var num []byte
	for _, k := range a.keys {
		e := a.byKey[k]
		line := append([]byte(e.name), ':')
		switch {
		case e.typ == TypeCounter:
			line = strconv.AppendFloat(line, e.sum, 'g', -1, 64)
			line = append(line, "|c"...)
		case e.set:
			v := e.val + e.sum
			if v < 0 {
				// A negative value cannot be set in one line: set 0,
				// then subtract.
				num = append(append([]byte(e.name), ":0|g"...), tagsSuffix(e)...)
				b.add(num)
			}
			line = strconv.AppendFloat(line, v, 'g', -1, 64)
			line = append(line, "|g"...)
		default:
			if e.sum >= 0 {
				line = append(line, '+')
			}
			line = strconv.AppendFloat(line, e.sum, 'g', -1, 64)
			line = append(line, "|g"...)
		}
		b.add(append(line, tagsSuffix(e)...))
	}
	clear(a.byKey)
	a.keys = slices.Delete(a.keys, 0, len(a.keys))
	a.start = time.Now()
}

func tagsSuffix(e *preEntry) []byte {
	var s []byte
	if e.tags != "" {
		s = append(append(s, "|#"...), e.tags...)
	}
	if e.cont != "" {
		s = append(append(s, "|c:"...), e.cont...)
	}
	return s
}
