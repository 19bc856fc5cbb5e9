package pcap

import (
	"net/netip"
	"time"

	"github.com/mdbus/mdbus/internal/cfgcheck"
)

// Reassembly bounds IP fragment reassembly. The zero value of every field
// is its default.
type Reassembly struct {
	// Off skips every fragment (ReasonFragmentLost) instead of reassembling.
	Off bool
	// MaxDatagrams is how many partly received datagrams are held at once;
	// a new one beyond it evicts the oldest. Default 64.
	MaxDatagrams int
	// MaxBytes bounds the bytes held across them; a fragment that would
	// pass it evicts the oldest datagrams. Default 4 MiB.
	MaxBytes int
	// Timeout gives up a datagram whose first fragment is older than this,
	// in capture time. Default 30 s (Linux's ipfrag_time).
	Timeout time.Duration
}

const (
	defaultMaxDatagrams = 64
	defaultMaxFragBytes = 4 << 20
	defaultFragTimeout  = 30 * time.Second
	// maxDatagramLen bounds a reassembled IP payload: no IP datagram
	// (without IPv6 jumbograms) is longer.
	maxDatagramLen = 65535
	// maxPieces bounds the fragments of one datagram (8-byte pieces of a
	// 64 KiB datagram would be 8192: far more than any real sender uses).
	maxPieces = 256
)

// Check returns an error wrapping ErrConfig that names the first field
// of c holding a negative value, or nil.
func (c Reassembly) Check() error {
	return cfgcheck.Negative(ErrConfig, cfgcheck.F("Reassembly.MaxDatagrams", c.MaxDatagrams),
		cfgcheck.F("Reassembly.MaxBytes", c.MaxBytes), cfgcheck.F("Reassembly.Timeout", c.Timeout))
}

// withDefaults fills the zero fields; a negative one (which Check
// refuses) is taken as zero.
func (c Reassembly) withDefaults() Reassembly {
	if c.MaxDatagrams <= 0 {
		c.MaxDatagrams = defaultMaxDatagrams
	}
	if c.MaxBytes <= 0 {
		c.MaxBytes = defaultMaxFragBytes
	}
	if c.Timeout <= 0 {
		c.Timeout = defaultFragTimeout
	}
	return c
}

type fragKey struct {
	src, dst netip.Addr
	id       uint32
	proto    uint8 // IPv4 only: IPv6 carries the protocol in the first fragment alone
	v6       bool
}

type fragSpan struct{ from, to int }

// partial is one datagram being reassembled.
type partial struct {
	key   fragKey
	first int64 // capture time of its first fragment, ns
	total int   // payload length, known from the last fragment; -1 before
	proto uint8 // from the fragment at offset 0
	have  bool  // the fragment at offset 0 arrived
	buf   []byte
	spans []fragSpan
}

// reassembler rebuilds IP datagrams from fragments within fixed bounds.
type reassembler struct {
	cfg     Reassembly
	parts   []*partial // oldest first
	bytes   int
	done    []byte // the last reassembled payload, valid until the next add
	free    []*partial
	dropped uint64 // datagrams given up
	rebuilt uint64
}

func (r *reassembler) init(cfg Reassembly) { r.cfg = cfg }

// add files fragment ip (captured at ts). When it completes its datagram,
// add returns the whole IP payload and sets ip.proto.
func (r *reassembler) add(ip *ipPacket, ts int64) ([]byte, Reason, bool) {
	if r.cfg.Off {
		return nil, ReasonFragmentLost, false
	}
	r.expire(ts)
	n := len(ip.payload)
	end := ip.fragOff + n
	// Every fragment but the last carries a multiple of 8 bytes (RFC 791,
	// RFC 8200); an empty one adds nothing.
	if end > maxDatagramLen || n == 0 || (ip.fragMore && n%8 != 0) {
		return nil, ReasonFragmentLost, false
	}
	key := fragKey{src: ip.src, dst: ip.dst, id: ip.fragID, v6: ip.v6}
	if !ip.v6 {
		key.proto = ip.proto
	}
	p := r.find(key)
	if p == nil {
		for len(r.parts) >= r.cfg.MaxDatagrams {
			r.evict(0)
		}
		p = r.newPartial(key, ts)
	}
	for _, s := range p.spans {
		if ip.fragOff < s.to && s.from < end {
			// Overlapping fragments are an attack or a broken sender;
			// RFC 5722 drops the whole datagram.
			r.evict(r.index(p))
			return nil, ReasonFragmentLost, false
		}
	}
	if !ip.fragMore {
		if p.total >= 0 || end < p.maxEnd() {
			r.evict(r.index(p))
			return nil, ReasonFragmentLost, false
		}
		p.total = end
	} else if p.total >= 0 && end > p.total {
		r.evict(r.index(p))
		return nil, ReasonFragmentLost, false
	}
	if len(p.spans) >= maxPieces {
		r.evict(r.index(p))
		return nil, ReasonFragmentLost, false
	}
	for r.bytes+n > r.cfg.MaxBytes && len(r.parts) > 1 && r.parts[0] != p {
		r.evict(0)
	}
	if r.bytes+n > r.cfg.MaxBytes {
		r.evict(r.index(p))
		return nil, ReasonFragmentLost, false
	}
	if len(p.buf) < end {
		p.buf = append(p.buf, make([]byte, end-len(p.buf))...)
	}
	copy(p.buf[ip.fragOff:end], ip.payload)
	r.bytes += n
	p.spans = append(p.spans, fragSpan{ip.fragOff, end})
	if ip.fragOff == 0 {
		p.have, p.proto = true, ip.proto
	}
	if p.total < 0 || !p.have || !p.complete() {
		return nil, ReasonFragment, false
	}
	// Complete: hand out the bytes, recycle the entry.
	r.done = append(r.done[:0], p.buf[:p.total]...)
	ip.proto = p.proto
	r.remove(r.index(p))
	r.rebuilt++
	return r.done, 0, true
}

func (p *partial) maxEnd() int {
	m := 0
	for _, s := range p.spans {
		m = max(m, s.to)
	}
	return m
}

// complete reports whether the spans cover [0, total); they never overlap.
func (p *partial) complete() bool {
	sum := 0
	for _, s := range p.spans {
		sum += s.to - s.from
	}
	return sum == p.total
}

func (r *reassembler) find(k fragKey) *partial {
	for _, p := range r.parts {
		if p.key == k {
			return p
		}
	}
	return nil
}

func (r *reassembler) index(p *partial) int {
	for i, q := range r.parts {
		if q == p {
			return i
		}
	}
	return -1
}

func (r *reassembler) newPartial(k fragKey, ts int64) *partial {
	var p *partial
	if n := len(r.free); n > 0 {
		p, r.free = r.free[n-1], r.free[:n-1]
	} else {
		p = &partial{}
	}
	*p = partial{key: k, first: ts, total: -1, buf: p.buf[:0], spans: p.spans[:0]}
	r.parts = append(r.parts, p)
	return p
}

// expire gives up datagrams older than the timeout.
func (r *reassembler) expire(ts int64) {
	for len(r.parts) > 0 && ts-r.parts[0].first > int64(r.cfg.Timeout) {
		r.evict(0)
	}
}

// evict gives up datagram i.
func (r *reassembler) evict(i int) {
	r.dropped++
	r.remove(i)
}

func (r *reassembler) remove(i int) {
	p := r.parts[i]
	for _, s := range p.spans {
		r.bytes -= s.to - s.from
	}
	r.parts = append(r.parts[:i], r.parts[i+1:]...)
	if len(r.free) < 8 && cap(p.buf) <= maxDatagramLen {
		r.free = append(r.free, p)
	}
}

// flush gives up everything still held (the end of the capture).
func (r *reassembler) flush() {
	for len(r.parts) > 0 {
		r.evict(0)
	}
}
