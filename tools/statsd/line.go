package statsd

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"
	"unsafe"

	"github.com/mdbus/mdbus/internal/cfgcheck"
)

// Type is a metric type.
type Type uint8

// Metric types. The values are part of no wire format: the bus carries the
// text line (see the package doc).
const (
	TypeNone         Type = iota
	TypeCounter           // c
	TypeGauge             // g
	TypeTimer             // ms
	TypeHistogram         // h
	TypeDistribution      // d
	TypeSet               // s
	numTypes
)

var typeNames = [numTypes]string{"none", "counter", "gauge", "timer", "histogram", "distribution", "set"}
var typeCodes = [numTypes]string{"", "c", "g", "ms", "h", "d", "s"}

// String returns the type's name: "counter", "gauge", "timer",
// "histogram", "distribution" or "set".
func (t Type) String() string {
	if t < numTypes {
		return typeNames[t]
	}
	return fmt.Sprintf("Type(%d)", uint8(t))
}

// Code returns the type's code in the line protocol: c, g, ms, h, d, s.
func (t Type) Code() string {
	if t < numTypes {
		return typeCodes[t]
	}
	return ""
}

// sampled reports whether values of t go into a histogram.
func (t Type) sampled() bool { return t == TypeTimer || t == TypeHistogram || t == TypeDistribution }

// Reason says why a line (or one metric of an etsy multi-metric line) was
// refused. Every refusal is counted by reason. The values and names are
// stable: new reasons are added before NumReasons.
type Reason uint8

// Reasons for refusing a line.
const (
	// ReasonNone: the metric is valid.
	ReasonNone Reason = iota
	// ReasonLineTooLong: the line is longer than Limits.MaxLineLen.
	ReasonLineTooLong
	// ReasonTruncated: the datagram was larger than the receive buffer, so
	// its last line was cut; that line is refused.
	ReasonTruncated
	// ReasonEmptyName: nothing before the ':'.
	ReasonEmptyName
	// ReasonNameTooLong: the name is longer than Limits.MaxNameLen.
	ReasonNameTooLong
	// ReasonBadName: the name holds a control character, space, '|', '#'
	// or '@'.
	ReasonBadName
	// ReasonInvalidUTF8: the line is not valid UTF-8.
	ReasonInvalidUTF8
	// ReasonNoValue: no ':' and value, or no '|' and type.
	ReasonNoValue
	// ReasonBadValue: a value is not a decimal number (or, for a set, is
	// empty).
	ReasonBadValue
	// ReasonNaNInf: a value is NaN or infinite (or overflows float64).
	ReasonNaNInf
	// ReasonTooManyValues: more packed values than Limits.MaxValues.
	ReasonTooManyValues
	// ReasonUnknownType: the type is none of c, g, ms, h, d, s.
	ReasonUnknownType
	// ReasonBadSampleRate: the sample rate is not a number in
	// [MinSampleRate, 1].
	ReasonBadSampleRate
	// ReasonTooManyTags: more tags than Limits.MaxTags.
	ReasonTooManyTags
	// ReasonTagsTooLong: the tag list is longer than Limits.MaxTagBytes.
	ReasonTagsTooLong
	// ReasonBadTag: an empty tag or one with a control character.
	ReasonBadTag
	// ReasonBadTimestamp: a |T field that is not a positive integer.
	ReasonBadTimestamp
	// ReasonBadField: an unknown or repeated field after the type.
	ReasonBadField
	// ReasonReservedName: a client's metric name starts with SelfPrefix,
	// which only the relay's and collector's own metrics may use (a
	// client could otherwise forge or hide them). The relay and Client
	// refuse it; the Parser does not check it.
	ReasonReservedName
	// NumReasons is the number of reasons (the length of counter arrays).
	NumReasons
)

var reasonNames = [NumReasons]string{
	"none", "line_too_long", "truncated", "empty_name", "name_too_long", "bad_name", "invalid_utf8",
	"no_value", "bad_value", "nan_inf", "too_many_values", "unknown_type", "bad_sample_rate",
	"too_many_tags", "tags_too_long", "bad_tag", "bad_timestamp", "bad_field", "reserved_name",
}

// String returns the reason's stable snake_case name, used in metric
// names and logs.
func (r Reason) String() string {
	if r < NumReasons {
		return reasonNames[r]
	}
	return fmt.Sprintf("reason_%d", uint8(r))
}

// Limits bound what one line may hold. The zero value of each field is its
// default; a negative one is refused by NewRelay, NewClient and
// NewCollector (RelayConfig's rule), and taken as zero by NewParser and
// ParseLine, which cannot fail.
type Limits struct {
	// MaxLineLen is the longest line accepted, in bytes; default 8192.
	// A relay or client lowers it to what one bus message can carry
	// (1,440 bytes with the publisher's default payload size; set
	// publisher.Config.PayloadSize for longer lines), so that a line is
	// refused and counted rather than lost.
	MaxLineLen int
	// MaxNameLen is the longest metric name; default 512.
	MaxNameLen int
	// MaxTags is the most tags on one line; default 64.
	MaxTags int
	// MaxTagBytes is the longest tag list (the bytes after '#'); default
	// 1024.
	MaxTagBytes int
	// MaxValues is the most packed values on one line (name:1:2:3|d);
	// default and at most MaxPacked.
	MaxValues int
}

// Default limits.
const (
	DefaultMaxLineLen  = 8192
	DefaultMaxNameLen  = 512
	DefaultMaxTags     = 64
	DefaultMaxTagBytes = 1024
	// MaxPacked is the largest Limits.MaxValues: the size of
	// Metric.Values.
	MaxPacked = 256
	// MinSampleRate is the smallest sample rate accepted (|@rate): one
	// value standing for a million. A smaller rate is refused
	// (ReasonBadSampleRate), as etsy's server would otherwise multiply a
	// counter by up to 1e300.
	MinSampleRate = 1e-6
)

// check refuses, by name, a negative limit or a negative one of the
// config's own fields (RelayConfig's rule).
func (l Limits) check(fields ...cfgcheck.Field) error {
	return cfgcheck.Negative(ErrConfig, append(fields, cfgcheck.F("Limits.MaxLineLen", l.MaxLineLen), cfgcheck.F("Limits.MaxNameLen", l.MaxNameLen),
		cfgcheck.F("Limits.MaxTags", l.MaxTags), cfgcheck.F("Limits.MaxTagBytes", l.MaxTagBytes), cfgcheck.F("Limits.MaxValues", l.MaxValues))...)
}

// withDefaults fills the zero limits; a negative one (which check
// refuses) is taken as zero by the parsers, which cannot fail.
func (l Limits) withDefaults() Limits {
	if l.MaxLineLen <= 0 {
		l.MaxLineLen = DefaultMaxLineLen
	}
	if l.MaxNameLen <= 0 {
		l.MaxNameLen = DefaultMaxNameLen
	}
	if l.MaxTags <= 0 {
		l.MaxTags = DefaultMaxTags
	}
	if l.MaxTagBytes <= 0 {
		l.MaxTagBytes = DefaultMaxTagBytes
	}
	if l.MaxValues <= 0 || l.MaxValues > MaxPacked {
		l.MaxValues = MaxPacked
	}
	return l
}

// Metric is one parsed metric. Its byte slices point into the parsed line:
// they are valid only as long as the line's buffer is, and a Metric is
// meant to be reused (Parser.Next overwrites it).
type Metric struct {
	// Name is the metric name, as sent.
	Name []byte
	// Type is the metric type.
	Type Type
	// Raw is the value field, packed values still joined by ':'. For a
	// set it holds the members (see Member).
	Raw []byte
	// N is the number of values (set members).
	N int
	// Values are the numeric values (not for sets), Values[:N].
	Values [MaxPacked]float64
	// Delta marks gauge values sent with a sign: "+3" and "-3" change the
	// gauge, "3" sets it (etsy semantics).
	Delta [MaxPacked]bool
	// Rate is the sample rate, 1 when absent.
	Rate float64
	// Tags is the tag list after '#', as sent ("k:v,k2"); NTags tags.
	Tags  []byte
	NTags int
	// Container is the DogStatsD container id (|c:...), empty if absent.
	Container []byte
	// Timestamp is the DogStatsD client timestamp in Unix seconds (|T...),
	// 0 if absent. It is carried, not used to place the metric in a flush
	// interval (see "Flush intervals" in the package doc).
	Timestamp int64
	// Line is the metric as sent. For the second and later metrics of an
	// etsy multi-metric line (Part set) it is only this metric's part,
	// without the name: "name:" + Line is the metric on a line of its own.
	Line []byte
	Part bool
}

// Member returns the i-th member of a set, i < N.
func (m *Metric) Member(i int) []byte {
	r := m.Raw
	for ; i > 0; i-- {
		j := bytes.IndexByte(r, ':')
		if j < 0 {
			return nil
		}
		r = r[j+1:]
	}
	if j := bytes.IndexByte(r, ':'); j >= 0 {
		r = r[:j]
	}
	return r
}

// Parser splits a datagram (or a bus message's line section) into lines
// and lines into metrics, without allocating. A Parser is not safe for
// concurrent use.
type Parser struct {
	lim  Limits
	rest []byte // lines not yet looked at
	line []byte // the current line
	name []byte // the current line's name, for etsy multi-metric lines
	more []byte // the rest of an etsy multi-metric line ("5|ms...")
	// Truncated marks that the last line of the input was cut; it is then
	// refused with ReasonTruncated.
	truncated bool
}

// NewParser returns a parser with the given limits (zero fields default).
func NewParser(l Limits) *Parser { return &Parser{lim: l.withDefaults()} }

// Limits returns the parser's limits, defaults applied.
func (p *Parser) Limits() Limits { return p.lim }

// Reset starts parsing b, a sequence of lines separated by '\n' (a '\r'
// before the '\n' is dropped). truncated says the last line was cut by a
// too small buffer.
func (p *Parser) Reset(b []byte, truncated bool) {
	p.rest, p.line, p.more, p.truncated = b, nil, nil, truncated
}

// Next parses the next metric into m. It returns false at the end of the
// input. Otherwise reason is ReasonNone for a valid metric, or why the
// metric (a line, or one part of an etsy multi-metric line) was refused;
// m.Line then holds the refused text (or its start, for long lines).
// Empty lines are skipped.
func (p *Parser) Next(m *Metric) (ok bool, reason Reason) {
	if len(p.more) > 0 {
		return true, p.parseMore(m)
	}
	for len(p.rest) > 0 {
		line := p.rest
		last := false
		if i := bytes.IndexByte(line, '\n'); i >= 0 {
			line, p.rest = line[:i], line[i+1:]
		} else {
			p.rest, last = nil, true
		}
		if n := len(line); n > 0 && line[n-1] == '\r' {
			line = line[:n-1]
		}
		if len(line) == 0 {
			continue
		}
		m.Line, m.Part = line, false
		if last && p.truncated {
			m.Line = line[:min(len(line), 64)]
			return true, ReasonTruncated
		}
		return true, p.parseLine(m, line)
	}
	return false, ReasonNone
}

// ParseLine parses a single line (no '\n') holding one metric into m. An
// etsy multi-metric line ("a:1|c:5|ms") is refused with ReasonBadField here;
// Parser.Next splits it.
func ParseLine(m *Metric, line []byte, l Limits) Reason {
	p := Parser{lim: l.withDefaults()}
	r := p.parseLine(m, line)
	if r == ReasonNone && len(p.more) > 0 {
		return ReasonBadField
	}
	return r
}

func (p *Parser) parseLine(m *Metric, line []byte) Reason {
	p.more = nil
	if len(line) > p.lim.MaxLineLen {
		m.Line = line[:64]
		return ReasonLineTooLong
	}
	if !utf8.Valid(line) {
		return ReasonInvalidUTF8
	}
	i := bytes.IndexByte(line, ':')
	if i < 0 {
		if j := bytes.IndexByte(line, '|'); j >= 0 {
			line = line[:j]
		}
		if r := p.checkName(line); r != ReasonNone {
			return r
		}
		return ReasonNoValue
	}
	name := line[:i]
	if r := p.checkName(name); r != ReasonNone {
		return r
	}
	p.name = name
	return p.parseBody(m, name, line[i+1:], line)
}

// parseMore parses the next part of an etsy multi-metric line.
func (p *Parser) parseMore(m *Metric) Reason {
	body := p.more
	p.more = nil
	// The part's text, for logs: it is not contiguous with the name.
	m.Line = body
	r := p.parseBody(m, p.name, body, body)
	m.Part = true
	return r
}

func (p *Parser) checkName(name []byte) Reason {
	if len(name) == 0 {
		return ReasonEmptyName
	}
	if len(name) > p.lim.MaxNameLen {
		return ReasonNameTooLong
	}
	for _, c := range name {
		if c <= ' ' || c == 0x7f || c == '|' || c == '#' || c == '@' {
			return ReasonBadName
		}
	}
	return ReasonNone
}

// parseBody parses "values|type[|field...]" after the name. A ':' inside
// the type, sample rate or timestamp field starts the next metric of an
// etsy multi-metric line (saved in p.more).
func (p *Parser) parseBody(m *Metric, name, body, line []byte) Reason {
	m.Name, m.Line, m.Part = name, line, false
	m.Type, m.N, m.Rate, m.Tags, m.NTags, m.Container, m.Timestamp = TypeNone, 0, 1, nil, 0, nil, 0
	bar := bytes.IndexByte(body, '|')
	if bar < 0 {
		return ReasonNoValue
	}
	m.Raw = body[:bar]
	rest := body[bar+1:]
	// The type field ends at '|' or, in etsy's multi-metric form, at ':'.
	end := bytes.IndexAny(rest, "|:")
	tf := rest
	if end >= 0 {
		tf = rest[:end]
	}
	switch string(tf) {
	case "c":
		m.Type = TypeCounter
	case "g":
		m.Type = TypeGauge
	case "ms":
		m.Type = TypeTimer
	case "h":
		m.Type = TypeHistogram
	case "d":
		m.Type = TypeDistribution
	case "s":
		m.Type = TypeSet
	default:
		if len(tf) == 0 {
			return ReasonNoValue
		}
		return ReasonUnknownType
	}
	rest = rest[len(tf):]
	var seen uint8 // fields seen: 1 rate, 2 tags, 4 container, 8 timestamp
	for len(rest) > 0 {
		if rest[0] == ':' { // etsy: the next metric of this line
			if len(rest) == 1 {
				return ReasonNoValue
			}
			p.more = rest[1:]
			m.Line = line[:len(line)-len(rest)]
			break
		}
		rest = rest[1:] // the '|'
		if len(rest) == 0 {
			return ReasonBadField
		}
		var f []byte
		var bit uint8
		switch c := rest[0]; {
		case c == '#':
			bit = 2
			j := bytes.IndexByte(rest, '|')
			if j < 0 {
				j = len(rest)
			}
			f, rest = rest[1:j], rest[j:]
			if r := p.checkTags(m, f); r != ReasonNone {
				return r
			}
		case c == 'c' && len(rest) > 1 && rest[1] == ':':
			bit = 4
			j := bytes.IndexByte(rest, '|')
			if j < 0 {
				j = len(rest)
			}
			m.Container, rest = rest[2:j], rest[j:]
		case c == '@' || c == 'T':
			bit = 1
			if c == 'T' {
				bit = 8
			}
			j := bytes.IndexAny(rest, "|:")
			if j < 0 {
				j = len(rest)
			}
			f, rest = rest[1:j], rest[j:]
			if c == '@' {
				if !numeric(f) {
					return ReasonBadSampleRate
				}
				r, err := strconv.ParseFloat(unsafe.String(unsafe.SliceData(f), len(f)), 64)
				if err != nil || !(r >= MinSampleRate && r <= 1) {
					return ReasonBadSampleRate
				}
				m.Rate = r
			} else {
				ts, ok := parseUint(f)
				if !ok || ts == 0 || ts > math.MaxInt64 {
					return ReasonBadTimestamp
				}
				m.Timestamp = int64(ts)
			}
		default:
			return ReasonBadField
		}
		if seen&bit != 0 {
			return ReasonBadField
		}
		seen |= bit
	}
	return p.parseValues(m)
}

func (p *Parser) checkTags(m *Metric, f []byte) Reason {
	if len(f) > p.lim.MaxTagBytes {
		return ReasonTagsTooLong
	}
	m.Tags = f
	if len(f) == 0 {
		return ReasonNone
	}
	n := 1
	start := 0
	for i, c := range f {
		if c < ' ' || c == 0x7f {
			return ReasonBadTag
		}
		if c == ',' {
			if i == start {
				return ReasonBadTag
			}
			n++
			start = i + 1
			if n > p.lim.MaxTags {
				return ReasonTooManyTags
			}
		}
	}
	if start == len(f) {
		return ReasonBadTag
	}
	m.NTags = n
	return ReasonNone
}

func (p *Parser) parseValues(m *Metric) Reason {
	raw := m.Raw
	if m.Type == TypeSet {
		if len(raw) == 0 {
			return ReasonBadValue
		}
		n := 1
		for i, c := range raw {
			if c == ':' {
				if i == 0 || i == len(raw)-1 || raw[i-1] == ':' {
					return ReasonBadValue
				}
				n++
			}
		}
		if n > p.lim.MaxValues {
			return ReasonTooManyValues
		}
		m.N = n
		return ReasonNone
	}
	for {
		j := bytes.IndexByte(raw, ':')
		v := raw
		if j >= 0 {
			v = raw[:j]
		}
		if m.N >= p.lim.MaxValues {
			return ReasonTooManyValues
		}
		f, delta, r := parseValue(v)
		if r != ReasonNone {
			return r
		}
		m.Values[m.N], m.Delta[m.N] = f, delta && m.Type == TypeGauge
		m.N++
		if j < 0 {
			return ReasonNone
		}
		raw = raw[j+1:]
	}
}

// parseValue parses a decimal number without allocating.
func parseValue(v []byte) (float64, bool, Reason) {
	if len(v) == 0 {
		return 0, false, ReasonBadValue
	}
	delta := v[0] == '+' || v[0] == '-'
	if !numeric(v) {
		if isNaNInf(v) {
			return 0, false, ReasonNaNInf
		}
		return 0, false, ReasonBadValue
	}
	f, err := strconv.ParseFloat(unsafe.String(unsafe.SliceData(v), len(v)), 64)
	if err != nil {
		if math.IsInf(f, 0) {
			return 0, false, ReasonNaNInf
		}
		return 0, false, ReasonBadValue
	}
	return f, delta, ReasonNone
}

// numeric reports whether v looks like [+-]digits[.digits][e[+-]digits]
// (a cheap check so that strconv never sees a string it would reject with
// an allocated error, nor hex, underscores, "inf" or "nan").
func numeric(v []byte) bool {
	i := 0
	if i < len(v) && (v[i] == '+' || v[i] == '-') {
		i++
	}
	digits := 0
	for ; i < len(v) && v[i] >= '0' && v[i] <= '9'; i++ {
		digits++
	}
	if i < len(v) && v[i] == '.' {
		i++
		for ; i < len(v) && v[i] >= '0' && v[i] <= '9'; i++ {
			digits++
		}
	}
	if digits == 0 {
		return false
	}
	if i < len(v) && (v[i] == 'e' || v[i] == 'E') {
		i++
		if i < len(v) && (v[i] == '+' || v[i] == '-') {
			i++
		}
		ed := 0
		for ; i < len(v) && v[i] >= '0' && v[i] <= '9'; i++ {
			ed++
		}
		if ed == 0 {
			return false
		}
	}
	return i == len(v)
}

func isNaNInf(v []byte) bool {
	if len(v) > 0 && (v[0] == '+' || v[0] == '-') {
		v = v[1:]
	}
	return bytes.EqualFold(v, []byte("nan")) || bytes.EqualFold(v, []byte("inf")) || bytes.EqualFold(v, []byte("infinity"))
}

func parseUint(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 19 {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	return n, true
}
