package bench

import (
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/mdbus/mdbus/internal/synth"
)

// itchSample is the first 1000 messages of NASDAQ's public TotalView-ITCH 5.0
// sample of 2019-12-30, each prefixed by a 2-byte big-endian length (see
// data/README.md for the source and licence).
//
//go:embed data/nasdaq-itch50-1000-messages.bin
var itchSample []byte

// ErrBadSize reports a message size specification that cannot be used.
var ErrBadSize = errors.New("bench: bad message size")

// Sizes says how long benchmark messages are: a fixed size, a uniform
// distribution, or the sizes (and bytes) of real or synthetic ITCH messages.
// The zero value is 64-byte messages.
//
// Every message starts with a StampLen-byte stamp, so shorter messages are
// lengthened to StampLen (ITCH's 12-byte system event and stock trading
// action messages, for instance); Padded counts them.
type Sizes struct {
	// Spec is the text form: "64", "16-1000", "itch" or "synth".
	Spec     string
	Min, Max int
	kind     sizeKind
}

type sizeKind int

const (
	sizeFixed sizeKind = iota
	sizeUniform
	sizeITCH
	sizeSynth
)

// ParseSizes parses a size specification:
//
//	64        every message 64 bytes
//	16-1000   uniformly random from 16 to 1000 bytes (seeded)
//	itch      the sizes and bytes of 1000 real NASDAQ ITCH 5.0 messages
//	synth     synthetic ITCH-shaped messages (internal/synth)
//
// maxLen is the largest message allowed (the payload limit); sizes must be
// at least StampLen.
func ParseSizes(spec string, maxLen int) (Sizes, error) {
	spec = strings.TrimSpace(spec)
	s := Sizes{Spec: spec}
	switch {
	case spec == "itch":
		s.kind, s.Min, s.Max = sizeITCH, 1<<30, 0
		for _, m := range itchMessages() {
			n := max(len(m), StampLen)
			s.Min, s.Max = min(s.Min, n), max(s.Max, n)
		}
	case spec == "synth":
		s.kind, s.Min, s.Max = sizeSynth, max(synth.Size(synth.OrderDelete), StampLen), synth.Size(synth.Trade)
	case strings.Contains(spec, "-"):
		lo, hi, _ := strings.Cut(spec, "-")
		a, err1 := strconv.Atoi(lo)
		b, err2 := strconv.Atoi(hi)
		if err1 != nil || err2 != nil || a > b {
			return s, fmt.Errorf("%w: %q: want MIN-MAX with MIN <= MAX", ErrBadSize, spec)
		}
		s.kind, s.Min, s.Max = sizeUniform, a, b
	default:
		n, err := strconv.Atoi(spec)
		if err != nil {
			return s, fmt.Errorf("%w: %q: want a byte count, MIN-MAX, itch or synth", ErrBadSize, spec)
		}
		s.kind, s.Min, s.Max = sizeFixed, n, n
	}
	if s.Min < StampLen {
		return s, fmt.Errorf("%w: %q: messages must be at least %d bytes (the timestamp and sequence stamp)", ErrBadSize, spec, StampLen)
	}
	if s.Max > maxLen {
		return s, fmt.Errorf("%w: %q: %d bytes is above the payload limit of %d bytes per message", ErrBadSize, spec, s.Max, maxLen)
	}
	return s, nil
}

// String returns the specification.
func (s Sizes) String() string {
	if s.Spec == "" {
		return "64"
	}
	return s.Spec
}

// Fixed reports whether every message has the same size.
func (s Sizes) Fixed() bool { return s.kind == sizeFixed }

// itchMessages splits the embedded sample into messages. A short or
// truncated tail ends the list.
func itchMessages() [][]byte {
	var out [][]byte
	b := itchSample
	for len(b) >= 2 {
		n := int(binary.BigEndian.Uint16(b))
		if n == 0 || len(b) < 2+n {
			break
		}
		out = append(out, b[2:2+n])
		b = b[2+n:]
	}
	return out
}

// messageRing is a ring of pre-built messages cycled by the sender, so that
// producing a message costs only writing its stamp. Its length is at least
// the batch size, so no buffer appears twice in one batch.
type messageRing struct {
	msgs  [][]byte
	i     int
	bytes int // total bytes in the ring
}

// newRing builds at least n messages of sizes s from seed.
func newRing(s Sizes, n int, seed uint64) *messageRing {
	var src [][]byte
	switch s.kind {
	case sizeITCH:
		src = itchMessages()
	case sizeSynth:
		g := synth.New(seed)
		for range 4096 {
			src = append(src, g.Next(nil))
		}
	case sizeUniform:
		r := synth.NewRandomSizes(seed, s.Min, s.Max)
		for range 4096 {
			src = append(src, r.Next(nil))
		}
	default:
		sz := s.Min
		if s.Spec == "" {
			sz = 64
		}
		src = [][]byte{make([]byte, sz)}
	}
	count := max(n, len(src))
	if s.kind == sizeFixed {
		count = max(n, 1024)
	}
	r := &messageRing{msgs: make([][]byte, count)}
	total := 0
	for i := range count {
		total += max(len(src[i%len(src)]), StampLen)
	}
	backing := make([]byte, total)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	off := 0
	for i := range count {
		m := src[i%len(src)]
		n := max(len(m), StampLen)
		buf := backing[off : off+n : off+n]
		copy(buf, m)
		if s.kind == sizeFixed {
			for j := StampLen; j < n; j++ {
				buf[j] = byte(rng.Uint32())
			}
		}
		r.msgs[i] = buf
		off += n
	}
	r.bytes = total
	return r
}

// next returns the next message buffer; the caller stamps it.
func (r *messageRing) next() []byte {
	m := r.msgs[r.i]
	r.i++
	if r.i == len(r.msgs) {
		r.i = 0
	}
	return m
}

// meanSize is the average message size of the ring.
func (r *messageRing) meanSize() float64 { return float64(r.bytes) / float64(len(r.msgs)) }
