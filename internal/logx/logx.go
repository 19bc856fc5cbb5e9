// Package logx builds the slog loggers of the mdbus commands: text or JSON
// output, a level, and a rate limit on repeated records, so that a storm
// of malformed packets is one line per interval with a count instead of a
// line per packet.
//
//	log, err := logx.New(os.Stderr, "json", "info")
//	...
//	defer logx.Flush(log) // report what the rate limit held back
package logx

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// DefaultInterval is the rate limit window of New.
const DefaultInterval = time.Second

// DefaultBurst is how many records with one message New lets through per
// window before it holds back the rest.
const DefaultBurst = 5

// ParseLevel parses "debug", "info", "warn" or "error" (or a number, as
// slog.Level does).
func ParseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return l, fmt.Errorf("log level %q: want debug, info, warn or error", s)
	}
	return l, nil
}

// New returns a logger writing format ("text" or "json") to w at level
// and above, rate limited with DefaultInterval and DefaultBurst.
func New(w io.Writer, format, level string) (*slog.Logger, error) {
	l, err := ParseLevel(level)
	if err != nil {
		return nil, err
	}
	opts := &slog.HandlerOptions{Level: l}
	var h slog.Handler
	switch strings.ToLower(format) {
	case "text", "":
		h = slog.NewTextHandler(w, opts)
	case "json":
		h = slog.NewJSONHandler(w, opts)
	default:
		return nil, fmt.Errorf("log format %q: want text or json", format)
	}
	return slog.New(NewRateLimited(h, DefaultInterval, DefaultBurst)), nil
}

// maxKeys bounds the messages the limiter tracks: the table is keyed by
// what the program logs, but a program that logs formatted messages would
// otherwise grow it without bound. A full table starts over.
const maxKeys = 1024

// RateLimited is a slog.Handler that passes at most Burst records with the
// same level and message per Interval to the handler it wraps. The first
// record after a window in which some were held back carries
// "suppressed"=N (how many) and the window's start; Flush reports what is
// still held back. It is safe for concurrent use, like every Handler.
type RateLimited struct {
	next slog.Handler
	st   *limitState
}

type limitState struct {
	interval time.Duration
	burst    int
	now      func() time.Time
	mu       sync.Mutex
	keys     map[limitKey]*window
}

type limitKey struct {
	level slog.Level
	msg   string
}

type window struct {
	start      time.Time
	passed     int
	suppressed int
	last       slog.Record // the last held-back record, for Flush
	h          slog.Handler
}

// NewRateLimited wraps next. interval <= 0 or burst <= 0 disable limiting.
func NewRateLimited(next slog.Handler, interval time.Duration, burst int) *RateLimited {
	return &RateLimited{next: next, st: &limitState{interval: interval, burst: burst, now: time.Now, keys: map[limitKey]*window{}}}
}

// Enabled reports whether the wrapped handler handles level.
func (h *RateLimited) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

// Handle passes r on, or holds it back and counts it.
func (h *RateLimited) Handle(ctx context.Context, r slog.Record) error {
	st := h.st
	if st.interval <= 0 || st.burst <= 0 {
		return h.next.Handle(ctx, r)
	}
	now := st.now()
	k := limitKey{r.Level, r.Message}
	st.mu.Lock()
	w := st.keys[k]
	if w == nil {
		if len(st.keys) >= maxKeys {
			clear(st.keys)
		}
		w = &window{start: now}
		st.keys[k] = w
	}
	var suppressed int
	var since time.Time
	if now.Sub(w.start) >= st.interval {
		suppressed, since = w.suppressed, w.start
		*w = window{start: now}
	}
	if w.passed >= st.burst {
		w.suppressed++
		w.last, w.h = r.Clone(), h.next
		st.mu.Unlock()
		return nil
	}
	w.passed++
	st.mu.Unlock()
	if suppressed > 0 {
		r = r.Clone()
		r.AddAttrs(slog.Int("suppressed", suppressed), slog.Time("suppressed_since", since))
	}
	return h.next.Handle(ctx, r)
}

// Flush writes one record per message that has records held back: the
// last one held, with "suppressed"=N. Call it before exit.
func (h *RateLimited) Flush() {
	st := h.st
	st.mu.Lock()
	type pending struct {
		r slog.Record
		h slog.Handler
	}
	var out []pending
	for _, w := range st.keys {
		if w.suppressed > 0 {
			r := w.last.Clone()
			r.AddAttrs(slog.Int("suppressed", w.suppressed), slog.Time("suppressed_since", w.start))
			out = append(out, pending{r, w.h})
			w.suppressed = 0
		}
	}
	st.mu.Unlock()
	for _, p := range out {
		p.h.Handle(context.Background(), p.r)
	}
}

// WithAttrs returns a handler sharing this one's limits.
func (h *RateLimited) WithAttrs(as []slog.Attr) slog.Handler {
	return &RateLimited{next: h.next.WithAttrs(as), st: h.st}
}

// WithGroup returns a handler sharing this one's limits.
func (h *RateLimited) WithGroup(name string) slog.Handler {
	return &RateLimited{next: h.next.WithGroup(name), st: h.st}
}

// Flush flushes l's handler if it is a RateLimited.
func Flush(l *slog.Logger) {
	if h, ok := l.Handler().(*RateLimited); ok {
		h.Flush()
	}
}
