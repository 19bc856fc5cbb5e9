package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"time"

	"github.com/mdbus/mdbus/internal/sock"
	"github.com/mdbus/mdbus/publisher"
	"github.com/mdbus/mdbus/subscriber"
	"github.com/mdbus/mdbus/wire"
)

// RawGSO is the floor under mdbus: the packets mdbus would send (the same
// messages, packed as many to a packet, each packet as long as mdbus's),
// sent in UDP GSO trains through a socket opened as the publisher's, and
// read with UDP_GRO from a socket opened as the subscriber's, with no
// protocol: the receiver reads a packet's first sequence and message count
// and nothing of its messages. See "The floor: raw-gso" in the package
// documentation.
const RawGSO System = "raw-gso"

// Layout of a raw-gso packet. It has mdbus's byte count: the 20 bytes of a
// MoldUDP64 header and a 2-byte length before each message, so that the
// datagrams, the trains and the bytes the kernel moves are mdbus's. Only
// the first 10 bytes are read; the rest of the header is zero.
//
//	0                 8         10            20
//	| first seq (8)   | count(2)| zero (10)   | len(2) msg | len(2) msg | ...
const (
	rawGSOSeqOffset   = 0
	rawGSOCountOffset = 8
	rawGSOHeaderLen   = wire.HeaderLen // 20
	rawGSOLenLen      = wire.MsgLenLen // 2
	// rawGSOEnd is the count of the end-of-run datagram (header only).
	rawGSOEnd = 0xFFFF
)

// rawGSOSender packs messages into packets and sends them as GSO trains.
// It is used by one goroutine.
//
// Packets wait, full, until the batch holds publisher.DefaultBatchPackets
// of them (one sendmmsg, cut by the socket into trains of at most 64,000
// bytes, as the publisher's are), or until the oldest has waited linger,
// judged at each send; with no linger every send leaves at once, its last
// packet partly filled. It allocates nothing per message.
type rawGSOSender struct {
	conn    sock.PacketConn
	c       *sock.Conn // nil in tests with a fake conn
	batch   *sock.Batch
	bufs    [][]byte // the batch's packet buffers, payload bytes each
	group   netip.AddrPort
	payload int
	linger  int64
	n       int   // packets in the batch, the last maybe being filled
	count   int   // messages in packet n-1
	since   int64 // when the oldest unsent message was packed
	sent    uint64
	last    uint64 // the last message's sequence, for the end marker
	done    bool
}

func newRawGSOSender(p sendParams) (*rawGSOSender, error) {
	c, err := sock.Open(sock.Config{
		Local:       netip.AddrPortFrom(netip.IPv4Unspecified(), 0),
		Interface:   p.ifi,
		TTL:         p.ttl,
		Loopback:    true,
		WriteBuffer: p.writeBuffer,
		GSO:         !p.noGSO,
		SendOnly:    true, // as the publisher's
	})
	if err != nil {
		return nil, fmt.Errorf("bench: raw-gso sender: %w", err)
	}
	s := newRawGSOPacker(c, p.group, p.payloadSize, p.linger)
	s.c = c
	return s, nil
}

// newRawGSOPacker builds the sender's packing state over conn.
func newRawGSOPacker(conn sock.PacketConn, group netip.AddrPort, payload int, linger time.Duration) *rawGSOSender {
	n := publisher.DefaultBatchPackets
	s := &rawGSOSender{
		conn: conn, batch: sock.NewBatch(n, 0), bufs: make([][]byte, n),
		group: group, payload: payload, linger: int64(linger),
	}
	backing := make([]byte, n*payload)
	for i := range s.bufs {
		s.bufs[i] = backing[i*payload : i*payload : (i+1)*payload]
	}
	return s
}

func (s *rawGSOSender) send(msgs [][]byte) error {
	for _, m := range msgs {
		if s.n == 0 || len(s.bufs[s.n-1])+rawGSOLenLen+len(m) > s.payload || s.count == wire.MaxCount {
			if s.n == len(s.bufs) {
				if err := s.flush(); err != nil {
					return err
				}
			}
			if s.n == 0 {
				s.since = Now()
			}
			_, seq, _ := ParseStamp(m)
			b := s.bufs[s.n][:rawGSOHeaderLen]
			clear(b)
			binary.BigEndian.PutUint64(b[rawGSOSeqOffset:], seq)
			s.bufs[s.n] = b
			s.n++
			s.count = 0
		}
		b := s.bufs[s.n-1]
		b = binary.BigEndian.AppendUint16(b, uint16(len(m)))
		b = append(b, m...)
		s.count++
		binary.BigEndian.PutUint16(b[rawGSOCountOffset:], uint16(s.count))
		s.bufs[s.n-1] = b
		if _, seq, ok := ParseStamp(m); ok {
			s.last = seq
		}
	}
	if s.n > 0 && Now()-s.since >= s.linger {
		return s.flush()
	}
	return nil
}

// flush sends every packet of the batch, the last one as it is.
func (s *rawGSOSender) flush() error {
	n := s.n
	for i := range n {
		s.batch.Msgs[i].Buf = s.bufs[i]
		s.batch.Msgs[i].Addr = s.group
	}
	s.n, s.count = 0, 0
	var err error
	sock.SendAll(s.conn, s.batch, n, func(_ *sock.Message, e error) bool {
		err = e
		return false
	})
	if err != nil {
		return fmt.Errorf("bench: raw-gso send: %w", err)
	}
	s.sent += uint64(n)
	return nil
}

// finish sends what is packed, then three end markers a millisecond apart.
func (s *rawGSOSender) finish(ctx context.Context) error {
	if s.done {
		return nil
	}
	s.done = true
	if s.n > 0 {
		if err := s.flush(); err != nil {
			return err
		}
	}
	var end [rawGSOHeaderLen]byte
	binary.BigEndian.PutUint64(end[rawGSOSeqOffset:], s.last+1)
	binary.BigEndian.PutUint16(end[rawGSOCountOffset:], rawGSOEnd)
	return sendEndMarker(ctx, "raw-gso", func() error {
		s.batch.Msgs[0].Buf, s.batch.Msgs[0].Addr = end[:], s.group
		_, err := s.conn.WriteBatch(s.batch, 1)
		return err
	})
}

func (s *rawGSOSender) close() error { return closeConn(s.conn) }

func (s *rawGSOSender) packets() uint64 { return s.sent }

// gsoPackets is how many of the packets left in GSO trains.
func (s *rawGSOSender) gsoPackets() uint64 {
	if s.c == nil {
		return 0
	}
	return s.c.GSOStats().Segments
}

// rawGSOReceiver reads a group on a socket opened as an mdbus subscriber's
// feed socket (SO_REUSEPORT, the same buffer, UDP_GRO unless NoGRO, the
// subscriber's batch of datagrams per read) and counts each packet's
// messages and bytes from its header and length, without reading them.
type rawGSOReceiver struct {
	rawLoop
	group   netip.Addr
	sink    *sink
	packets uint64
}

func newRawGSOReceiver(p recvParams, sk *sink) (*rawGSOReceiver, error) {
	c, err := openRawReceiver(p, !p.noGRO, "raw-gso receiver")
	if err != nil {
		return nil, err
	}
	batch := sock.NewBatch(subscriber.DefaultBatchSize, subscriber.DefaultDatagramSize)
	r := &rawGSOReceiver{rawLoop: newRawLoop(c, batch), group: p.group.Addr(), sink: sk}
	go r.run(r.handle, "raw-gso receive")
	return r, nil
}

// handle counts a read's packets into the sink and reports whether the
// end marker was among them. It allocates nothing.
func (r *rawGSOReceiver) handle(msgs []sock.Message) (ended bool) {
	for i := range msgs {
		m := &msgs[i]
		if m.Truncated || len(m.Buf) < rawGSOHeaderLen || (m.Dst.IsValid() && m.Dst.Unmap() != r.group) {
			continue
		}
		first := binary.BigEndian.Uint64(m.Buf[rawGSOSeqOffset:])
		count := int(binary.BigEndian.Uint16(m.Buf[rawGSOCountOffset:]))
		if count == rawGSOEnd {
			ended = true
			continue
		}
		body := len(m.Buf) - rawGSOHeaderLen - count*rawGSOLenLen
		if count == 0 || body < 0 {
			r.sink.disorder++
			continue
		}
		r.packets++
		var sched int64
		if len(m.Buf) >= rawGSOHeaderLen+rawGSOLenLen+StampLen {
			sched, _, _ = ParseStamp(m.Buf[rawGSOHeaderLen+rawGSOLenLen:])
		}
		var skip int
		if warm := r.sink.warmupUntil.Load(); sched < warm {
			// The packet starts in a latency run's warm-up; its later
			// messages may not. Only such packets are walked.
			skip, sched = inWarmup(m.Buf[rawGSOHeaderLen:], count, warm)
		}
		r.sink.run(first, uint64(count), uint64(body), uint64(skip), sched, m.KernelTime)
	}
	return ended
}

// inWarmup walks the count messages of a packet body (each after its
// 2-byte length) and returns how many lead it scheduled before warm, and
// the scheduled time of the first that is not (0 if none is).
func inWarmup(body []byte, count int, warm int64) (skip int, sched int64) {
	for skip < count && len(body) >= rawGSOLenLen {
		n := int(binary.BigEndian.Uint16(body))
		body = body[rawGSOLenLen:]
		if n > len(body) {
			break
		}
		if t, _, ok := ParseStamp(body[:n]); ok && t >= warm {
			return skip, t
		}
		body = body[n:]
		skip++
	}
	return count, 0
}

func (r *rawGSOReceiver) counters(res *SubResult) {
	r.rawLoop.counters(res)
	res.Packets = r.packets
	res.Lost = r.sink.missing
}

// run records a packet of n consecutive messages from sequence first,
// bytes long in all, of which the first skip were scheduled in the
// warm-up and the next at sched: the counts and the sequence check of
// message, once per packet. Latency, when sampled, is that next message's,
// recorded once for the packet.
func (s *sink) run(first, n, bytes, skip uint64, sched, kernelRT int64) {
	s.msgs += n
	s.bytes += bytes
	s.count(first, n)
	skip = min(skip, n)
	lo := first + skip // the first message after the warm-up
	sampled := n - skip
	if s.sampleMask != 0 && lo > 0 {
		// Sequences in [lo, first+n) with the mask's bits clear; the
		// mask is a power of two less one.
		k := s.sampleMask + 1
		sampled = (first+n-1)/k - (lo-1)/k
	}
	if sampled == 0 && s.started {
		return
	}
	now := s.stamp()
	if sampled == 0 || sched < s.warmupUntil.Load() {
		return
	}
	s.measured += sampled
	if s.lat == nil || sched == 0 {
		return
	}
	s.lat.Record(now, now-sched)
	if kernelRT != 0 && s.wire != nil {
		s.split(now, sched, kernelRT)
	}
}

// rawGSOCapacity finds the raw-gso result of the same shape as m: message
// sizes, packet payload, subscribers and processes.
func rawGSOCapacity(capa []CapacityResult, m CapacityResult) (CapacityResult, bool) {
	for _, r := range capa {
		if r.System == RawGSO && r.Size == m.Size && r.PayloadSize == m.PayloadSize &&
			r.Subscribers == m.Subscribers && r.Processes == m.Processes {
			return r, true
		}
	}
	return CapacityResult{}, false
}
