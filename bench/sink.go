package bench

import "sync/atomic"

// sink tallies what one receiver delivers: messages, bytes, the sequence
// check, and latency. It is used by the receiving goroutine only and read
// after that goroutine has stopped.
type sink struct {
	msgs, bytes       uint64
	measured          uint64 // messages scheduled at or after warmupUntil
	started           bool
	first, last       int64 // CLOCK_MONOTONIC ns of the first and latest sampled delivery
	next              uint64
	missing, disorder uint64

	// sampleMask selects the messages whose delivery time is read: those
	// with seq&sampleMask == 0 (0 reads every message).
	sampleMask uint64
	// warmupUntil is the end of the warm-up (CLOCK_MONOTONIC ns): messages
	// scheduled before it are counted but their latency is not recorded.
	// Set once, before the sender starts, by another goroutine.
	warmupUntil atomic.Int64
	lat         *Recorder // nil: no latency
	// With kernel timestamps: wire = kernel receive - scheduled send,
	// recvPath = delivery - kernel receive. rtOffset converts the kernel's
	// CLOCK_REALTIME to CLOCK_MONOTONIC.
	wire, recvPath *Recorder
	rtOffset       int64

	// Recovery (mdbus): gaps the subscriber reported, oldest first, and
	// the time each was found. A gap is repaired when its last message
	// is delivered; recovery records found-to-repaired.
	gaps     []gapNote
	repaired uint64
	recovery *Recorder

	// echo, when set (a closed loop), is called with each delivered
	// message's sequence after it is recorded. Set before the receiver
	// starts.
	echo func(seq uint64)
}

type gapNote struct {
	from, to uint64 // [from, to)
	found    int64
}

// gap notes a missing range [from, to) found at time now.
func (s *sink) gap(from, to uint64, now int64) {
	s.gaps = append(s.gaps, gapNote{from, to, now})
}

// resolve settles the gaps that seq reaches: a delivered message inside
// the oldest gap is a repair; reaching its last message records the
// recovery time; passing it without delivering that message means the end
// of the gap was lost.
func (s *sink) resolve(seq uint64) {
	for len(s.gaps) > 0 {
		g := &s.gaps[0]
		if seq < g.from {
			return
		}
		if seq < g.to {
			s.repaired++
			if seq == g.to-1 && s.recovery != nil {
				now := Now()
				s.recovery.Record(now, now-g.found)
			}
			if seq < g.to-1 {
				return
			}
		}
		s.gaps = s.gaps[1:]
		if seq < g.to {
			return
		}
	}
}

func newSink() *sink { return &sink{next: 1} }

// deliver records one delivered message (message), then passes its
// sequence to echo.
func (s *sink) deliver(data []byte, kernelRT int64) {
	s.message(data, kernelRT)
	if s.echo != nil {
		if _, seq, ok := ParseStamp(data); ok {
			s.echo(seq)
		}
	}
}

// message records one delivered message. kernelRT is the kernel's receive
// time (CLOCK_REALTIME ns) or 0.
func (s *sink) message(data []byte, kernelRT int64) {
	sched, seq, ok := ParseStamp(data)
	if !ok {
		s.disorder++
		return
	}
	s.msgs++
	s.bytes += uint64(len(data))
	if len(s.gaps) > 0 {
		s.resolve(seq)
	}
	s.count(seq, 1)
	if seq&s.sampleMask != 0 && s.started {
		return
	}
	now := s.stamp()
	if sched < s.warmupUntil.Load() {
		return
	}
	s.measured++
	if s.lat == nil {
		return
	}
	s.lat.Record(now, now-sched)
	if kernelRT != 0 && s.wire != nil {
		s.split(now, sched, kernelRT)
	}
}

// count checks the sequences of n messages from first against the next
// expected: in order, after a gap (counted missing), or late (disorder).
func (s *sink) count(first, n uint64) {
	switch {
	case first == s.next:
		s.next += n
	case first > s.next:
		s.missing += first - s.next
		s.next = first + n
	default:
		s.disorder += n
	}
}

// stamp returns the time now, noted as the last delivery (and the first,
// for the first).
func (s *sink) stamp() int64 {
	now := Now()
	if !s.started {
		s.started, s.first = true, now
	}
	s.last = now
	return now
}

// split records the wire and receive-path parts of the latency of a
// message scheduled at sched, received by the kernel at kernelRT and
// delivered now.
func (s *sink) split(now, sched, kernelRT int64) {
	k := kernelRT - s.rtOffset
	s.wire.Record(now, k-sched)
	s.recvPath.Record(now, now-k)
}

// flush hands the recorders' last intervals to the collector.
func (s *sink) flush(now int64) {
	for _, r := range []*Recorder{s.lat, s.wire, s.recvPath, s.recovery} {
		if r != nil {
			r.Flush(now)
		}
	}
}

// result fills the counts of a SubResult.
func (s *sink) result(r *SubResult) {
	r.Messages, r.Bytes = s.msgs, s.bytes
	r.Missing, r.Disorder, r.Measured = s.missing, s.disorder, s.measured
	if s.started && s.last > s.first {
		r.Seconds = float64(s.last-s.first) / 1e9
	}
}

// tail counts as missing the messages after the last one delivered, once
// the sender says it sent sent messages.
func (s *sink) tail(sent uint64) {
	if last := s.next - 1; sent > last {
		s.missing += sent - last
		s.next = sent + 1
	}
}

// setWarmup sets the end of the warm-up.
func (s *sink) setWarmup(until int64) { s.warmupUntil.Store(until) }
