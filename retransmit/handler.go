package retransmit

import (
	"errors"
	"io"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/mdbus/mdbus/internal/monotime"
	"github.com/mdbus/mdbus/internal/sock"
	"github.com/mdbus/mdbus/wire"
)

// Reason is why a request was refused.
type Reason int

// Reasons for refusing a request, in the order the handler checks them.
const (
	// ReasonBadSource: source port 0, or an unspecified, multicast or
	// broadcast source address (spoofed; nothing to answer).
	ReasonBadSource Reason = iota
	// ReasonNotAllowed: the source is outside ServerConfig.Allow.
	ReasonNotAllowed
	// ReasonRequestLen: not 20 bytes (wire.ErrRequestLen).
	ReasonRequestLen
	// ReasonBadSession: session not printable ASCII (wire.ErrBadSession).
	ReasonBadSession
	// ReasonZeroSeq: sequence 0 (wire.ErrZeroSeq).
	ReasonZeroSeq
	// ReasonZeroCount: count 0 or 0xFFFF (wire.ErrZeroCount).
	ReasonZeroCount
	// ReasonSeqOverflow: sequence + count overflows (wire.ErrSeqOverflow).
	ReasonSeqOverflow
	// ReasonUnknownSession: no source knows the session.
	ReasonUnknownSession
	// ReasonCoalesced: the same range was answered within the coalescing
	// window, to this requester or on the repair group.
	ReasonCoalesced
	// ReasonOutOfRange: no message of the range is held.
	ReasonOutOfRange
	// ReasonTooLarge: the first message does not fit the payload size.
	ReasonTooLarge
	// ReasonRateLimited: the global or the requester's bucket could not
	// pay for the first packet.
	ReasonRateLimited
	// ReasonSourceError: a Source failed otherwise (for example a journal
	// read error) before the first packet.
	ReasonSourceError
	numReasons
)

var reasonNames = [numReasons]string{
	"bad-source", "not-allowed", "request-len", "bad-session", "zero-seq", "zero-count",
	"seq-overflow", "unknown-session", "coalesced", "out-of-range", "too-large", "rate-limited",
	"source-error",
}

func (r Reason) String() string {
	if r < 0 || r >= numReasons {
		return "unknown"
	}
	return reasonNames[r]
}

// counters are the Server's statistics, written by its goroutine (or
// poll, under the same lock) and read by Stats.
type counters struct {
	requests, answered, capped, partial, polled  atomic.Uint64
	coalesced, deferred, deferredAhead           atomic.Uint64
	deferredAnswered, toldLater                  atomic.Uint64
	confirms, confirmBytes, groupSize, feedRate  atomic.Uint64
	uniPackets, uniBytes, mPackets, mBytes, msgs atomic.Uint64
	sendErrors, readErrors, kernelDrops          atomic.Uint64
	refused                                      [numReasons]atomic.Uint64
}

// outQueue collects answer packets for one socket and sends them in
// batches. Its buffers are allocated once.
type outQueue struct {
	conn      sock.PacketConn
	batch     *sock.Batch
	bufs      [][]byte
	n         int
	multicast bool
	st        *counters
	onErr     func(error)
}

func newOutQueue(conn sock.PacketConn, n, payload int, multicast bool, st *counters, onErr func(error)) *outQueue {
	q := &outQueue{conn: conn, batch: sock.NewBatch(n, 0), bufs: make([][]byte, n), multicast: multicast, st: st, onErr: onErr}
	backing := make([]byte, n*payload)
	for i := range q.bufs {
		q.bufs[i] = backing[i*payload : i*payload : (i+1)*payload]
	}
	return q
}

// buf returns an empty buffer with payload bytes of room for the next
// packet, flushing first when all are queued.
func (q *outQueue) buf() []byte {
	if q.n == len(q.bufs) {
		q.flush()
	}
	return q.bufs[q.n][:0]
}

// push queues pkt (built in the buffer buf returned) for to.
func (q *outQueue) push(pkt []byte, to netip.AddrPort) {
	m := &q.batch.Msgs[q.n]
	m.Buf, m.Addr = pkt, to
	q.n++
}

// moveLastTo moves the packet queued last to position i, after the ones
// before it; when a flush sent position i already (the queue filled),
// it stays last.
func (q *outQueue) moveLastTo(i int) {
	last := q.n - 1
	if i >= last || i < 0 {
		return
	}
	m, b := q.batch.Msgs[last], q.bufs[last]
	copy(q.batch.Msgs[i+1:last+1], q.batch.Msgs[i:last])
	copy(q.bufs[i+1:last+1], q.bufs[i:last])
	q.batch.Msgs[i], q.bufs[i] = m, b
}

// flush sends the queued packets. A datagram the kernel refuses (for
// instance no route to a spoofed source) is counted and skipped
// (sock.SendAll).
func (q *outQueue) flush() {
	msgs := q.batch.Msgs
	packets, bytes := uint64(q.n), uint64(0)
	for i := range q.n {
		bytes += uint64(len(msgs[i].Buf))
	}
	sock.SendAll(q.conn, q.batch, q.n, func(m *sock.Message, err error) bool {
		if m != nil {
			packets--
			bytes -= uint64(len(m.Buf))
		}
		q.st.sendErrors.Add(1)
		if q.onErr != nil && !errors.Is(err, io.ErrNoProgress) {
			q.onErr(err)
		}
		return true
	})
	if q.multicast {
		q.st.mPackets.Add(packets)
		q.st.mBytes.Add(bytes)
	} else {
		q.st.uniPackets.Add(packets)
		q.st.uniBytes.Add(bytes)
	}
	for i := range q.n {
		msgs[i].Buf = nil
	}
	q.n = 0
}

// handlerConfig is the normalized configuration the handler runs on.
type handlerConfig struct {
	sources         []Source
	group           netip.AddrPort // valid when repairs may go multicast
	unicastFirst    bool
	maxPerRequest   int
	maxRequestBytes int
	payloadUni      int
	payloadMulti    int
	allow           []netip.Prefix
}

// handler is the request-handling logic of a Server, without its sockets:
// validation, caps, rate limits, coalescing and building the answer. It is
// owned by one goroutine.
type handler struct {
	cfg    handlerConfig
	global bucket
	reqs   requesterTable
	coal   coalesceTable
	group  groupTable
	later  []deferred // requests held back for tokens, oldest first
	// The last "sending" confirm: when, and the group size it carried.
	sentAt    monotime.Time
	sentGroup uint16
	maxLater  int
	budget    feedBudget
	uni       *outQueue
	multi     *outQueue // nil without a repair group
	st        *counters
}

func (h *handler) refuse(r Reason) { h.st.refused[r].Add(1) }

// handle processes one datagram b received from from; truncated reports
// that it was larger than the receive buffer. Answers are queued; call
// flush to send what is left.
func (h *handler) handle(now monotime.Time, b []byte, truncated bool, from netip.AddrPort) {
	// Counted last, and read first by Stats: a snapshot that shows a
	// request also shows its verdict.
	defer h.st.requests.Add(1)
	src := from.Addr().Unmap()
	if !validSource(src, from.Port()) {
		h.refuse(ReasonBadSource)
		return
	}
	if !h.allowed(src) {
		h.refuse(ReasonNotAllowed)
		return
	}
	if truncated {
		h.refuse(ReasonRequestLen)
		return
	}
	req, err := wire.ParseRequest(b)
	if err != nil {
		h.refuse(requestErrReason(err))
		return
	}
	if !h.known(req.Session) {
		// Perhaps not seen yet: held like a range not cached yet.
		count := min(int(req.Count), h.cfg.maxPerRequest)
		multicast := h.multi != nil && !h.cfg.unicastFirst
		if !h.hold(now, req.Session, req.Seq, count, from, src, multicast) {
			h.refuse(ReasonUnknownSession)
			return
		}
		h.st.deferredAhead.Add(1)
		return
	}
	count := int(req.Count)
	if count > h.cfg.maxPerRequest {
		count = h.cfg.maxPerRequest
		h.st.capped.Add(1)
	}
	h.group.heard(now, from)
	key := coalesceKey{session: req.Session, seq: req.Seq, count: count}
	multicast := h.multi != nil && !h.cfg.unicastFirst
	if e := h.coal.recent(now, key); e != nil {
		switch {
		case e.multicast, e.from == from:
			// Answered (or held back) for everyone, or for this
			// requester, moments ago: the answer is on its way.
			h.st.coalesced.Add(1)
			return
		case h.multi != nil:
			multicast = true // a second requester wants it: answer once for all
		}
	}
	msgs, r := h.answerConfirmed(now, req.Session, req.Seq, count, from, src, multicast)
	if msgs == 0 {
		if (r == ReasonRateLimited || r == ReasonOutOfRange && !h.gone(req.Session, req.Seq)) &&
			h.hold(now, req.Session, req.Seq, count, from, src, multicast) {
			if r == ReasonOutOfRange {
				h.st.deferredAhead.Add(1)
			}
			h.coal.record(now, key, from, multicast)
			return
		}
		if r == ReasonOutOfRange && h.ahead(req.Session, req.Seq) && h.tellLater(now, req.Session, req.Seq, count, from, multicast) {
			return
		}
		h.refuse(r)
		return
	}
	h.answered(now, req.Session, req.Seq, count, msgs)
	h.coal.record(now, key, from, multicast)
}

// answerConfirmed is answer, with a multicast answer preceded now and
// then by its confirm (wire.ConfirmSending for the messages answered) on
// the repair group: at most one per sendingEvery, and at once when the
// group size changed. Its job is to carry the group size, which sizes
// the subscribers' back-off; the repair itself, microseconds behind it,
// tells those missing the same range that it came, so a confirm per
// answer would only double the packets every subscriber reads.
func (h *handler) answerConfirmed(now monotime.Time, s wire.Session, seq wire.Seq, count int, from netip.AddrPort, src netip.Addr, multicast bool) (int, Reason) {
	var start int
	if multicast {
		start = h.multi.n
	}
	msgs, r := h.answer(now, s, seq, count, from, src, multicast)
	if msgs > 0 && multicast {
		if g := h.group.size(now); g != h.sentGroup || h.sentAt == 0 || now.Sub(h.sentAt) >= sendingEvery {
			if h.confirm(now, wire.Confirm{Session: s, Seq: seq, Count: uint16(msgs), Kind: wire.ConfirmSending}, from, true) {
				h.multi.moveLastTo(start)
				h.sentGroup, h.sentAt = g, now
			}
		}
	}
	return msgs, r
}

// sendingEvery bounds the "sending" confirms on the repair group: 100 a
// second keep every subscriber's group size fresh.
const sendingEvery = 10 * time.Millisecond

// answered accounts for an answer of msgs messages to a request for
// count.
func (h *handler) answered(now monotime.Time, s wire.Session, seq wire.Seq, count, msgs int) {
	h.st.answered.Add(1)
	h.st.msgs.Add(uint64(msgs))
	if msgs < count {
		h.st.partial.Add(1)
	}
}

// confirm queues c, stamped with the group size, on the repair group
// (multicast) or to the requester. There is at most one per request
// answered or held back (30 bytes for a 20-byte request), paid from the
// global bucket like the answers, so that the server's total stays
// within its rate; when that bucket is dry the confirm is skipped (the
// requester then retries after its backoff, as without confirms).
func (h *handler) confirm(now monotime.Time, c wire.Confirm, to netip.AddrPort, multicast bool) bool {
	h.global.Refill(now)
	if !h.global.Has(wire.ConfirmLen) {
		return false
	}
	h.global.Take(wire.ConfirmLen)
	q := h.uni
	if multicast {
		q, to = h.multi, h.cfg.group
	}
	c.Group = h.group.size(now)
	q.push(wire.AppendConfirm(q.buf(), c), to)
	h.st.confirms.Add(1)
	h.st.confirmBytes.Add(wire.ConfirmLen)
	return true
}

// answer queues the packets for [seq, seq+count) ∩ held, within the caps
// and the buckets, and returns how many messages they carry, or 0 and why.
func (h *handler) answer(now monotime.Time, s wire.Session, seq wire.Seq, count int, from netip.AddrPort, src netip.Addr, multicast bool) (int, Reason) {
	q, payload, to := h.uni, h.cfg.payloadUni, from
	if multicast {
		q, payload, to = h.multi, h.cfg.payloadMulti, h.cfg.group
	}
	h.global.Refill(now)
	if !h.global.Has(wire.HeaderLen + wire.MsgLenLen) {
		return 0, ReasonRateLimited // cheap early refusal under a flood
	}
	rb := h.reqs.get(now, requesterKey(src))
	pos, end := seq, seq+wire.Seq(count)
	bytesLeft := h.cfg.maxRequestBytes
	msgs := 0
	why := ReasonOutOfRange
	for pos < end {
		buf := q.buf()
		var pkt []byte
		n := 0
		// Never build more than the request may still send: a packet
		// dropped for MaxRequestBytes would cost its source's reads (a
		// journal's disk) for nothing.
		size := min(payload, bytesLeft)
		if size < wire.HeaderLen+wire.MsgLenLen {
			break // MaxRequestBytes reached
		}
		for _, source := range h.cfg.sources {
			var err error
			pkt, n, err = source.AppendPacket(buf, s, pos, int(end-pos), size)
			if err != nil {
				if size < payload && errors.Is(err, wire.ErrMessageTooLarge) {
					return msgs, why // MaxRequestBytes reached
				}
				why = ReasonSourceError
				if errors.Is(err, wire.ErrMessageTooLarge) {
					why = ReasonTooLarge
				}
				return msgs, why
			}
			if n > 0 {
				break
			}
		}
		if n == 0 {
			next, ok := h.nextHeld(s, pos, end)
			if !ok {
				break
			}
			pos = next
			continue
		}
		l := len(pkt)
		if l > bytesLeft {
			break // MaxRequestBytes reached
		}
		if !h.global.Has(float64(l)) || !rb.Has(float64(l)) {
			if msgs == 0 {
				why = ReasonRateLimited
			}
			break
		}
		h.global.Take(float64(l))
		rb.Take(float64(l))
		q.push(pkt, to)
		bytesLeft -= l
		pos += wire.Seq(n)
		msgs += n
	}
	return msgs, why
}

// nextHeld is the smallest sequence in (pos, end) some source holds, pos
// being held by none: a HoleySource says where its next held sequence is,
// another source where its range starts.
func (h *handler) nextHeld(s wire.Session, pos, end wire.Seq) (wire.Seq, bool) {
	best, ok := end, false
	for _, source := range h.cfg.sources {
		if hs, holey := source.(HoleySource); holey {
			if q, held := hs.NextHeld(s, pos+1); held && q < best {
				best, ok = q, true
			}
			continue
		}
		first, next, known := source.Bounds(s)
		if known && first > pos && first < best && first < next {
			best, ok = first, true
		}
	}
	return best, ok
}

func (h *handler) known(s wire.Session) bool {
	for _, source := range h.cfg.sources {
		if _, _, ok := source.Bounds(s); ok {
			return true
		}
	}
	return false
}

func (h *handler) allowed(a netip.Addr) bool {
	if len(h.cfg.allow) == 0 {
		return true
	}
	a = a.WithZone("") // Contains never matches an address with a zone
	for _, p := range h.cfg.allow {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// requesterKey is the address a requester's bucket is kept under: the
// address itself for IPv4, its /64 for IPv6 (one host usually holds a
// whole /64, so keying by /128 would hand it 2^64 buckets).
func requesterKey(a netip.Addr) netip.Addr {
	if a.Is6() {
		p, _ := a.WithZone("").Prefix(64)
		return p.Addr()
	}
	return a
}

// flush sends the queued answers.
func (h *handler) flush() {
	h.st.groupSize.Store(uint64(h.group.last))
	if h.uni.n > 0 {
		h.uni.flush()
	}
	if h.multi != nil && h.multi.n > 0 {
		h.multi.flush()
	}
}

var ipv4Broadcast = netip.AddrFrom4([4]byte{255, 255, 255, 255})

// validSource reports whether an answer may be sent to a (unmapped), port.
func validSource(a netip.Addr, port uint16) bool {
	return port != 0 && a.IsValid() && !a.IsUnspecified() && !a.IsMulticast() && a != ipv4Broadcast
}

func requestErrReason(err error) Reason {
	switch {
	case errors.Is(err, wire.ErrBadSession):
		return ReasonBadSession
	case errors.Is(err, wire.ErrZeroSeq):
		return ReasonZeroSeq
	case errors.Is(err, wire.ErrZeroCount):
		return ReasonZeroCount
	case errors.Is(err, wire.ErrSeqOverflow):
		return ReasonSeqOverflow
	}
	return ReasonRequestLen
}
