package subscriber

import (
	"encoding/binary"
	"log/slog"
	"net/netip"
	"testing"

	"github.com/mdbus/mdbus/internal/labtest"
	"github.com/mdbus/mdbus/internal/monotime"
	"github.com/mdbus/mdbus/internal/sock"
	"github.com/mdbus/mdbus/wire"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { labtest.Main(m) }

var (
	discard   = slog.New(slog.DiscardHandler)
	testGroup = netip.MustParseAddrPort("239.7.7.7:31000")
	srcA      = netip.MustParseAddrPort("127.0.0.1:40001")
	srcB      = netip.MustParseAddrPort("127.0.0.2:40002")
	repairer  = netip.MustParseAddrPort("127.0.0.9:5000")
	sessA     = mustSession("SESSA")
	sessB     = mustSession("SESSB")
)

func mustSession(s string) wire.Session {
	sess, err := wire.ParseSession(s)
	if err != nil {
		panic(err)
	}
	return sess
}

// payload is the test content of message seq: its sequence, big endian,
// then seq%7 filler bytes, so sizes vary.
func payload(seq wire.Seq) []byte {
	b := binary.BigEndian.AppendUint64(nil, uint64(seq))
	for range int(seq % 7) {
		b = append(b, byte(seq))
	}
	return b
}

// pkt encodes a packet of session s carrying messages seq .. seq+n-1.
func pkt(s wire.Session, seq wire.Seq, n int) []byte {
	var e wire.Encoder
	e.Reset(nil, s, seq, wire.MaxPayloadSize)
	for i := range n {
		if err := e.Add(payload(seq + wire.Seq(i))); err != nil {
			panic(err)
		}
	}
	return e.Bytes()
}

func hb(s wire.Session, next wire.Seq) []byte  { return wire.AppendHeartbeat(nil, s, next) }
func eos(s wire.Session, next wire.Seq) []byte { return wire.AppendEndOfSession(nil, s, next) }

// raw builds a header with any count and appends body verbatim.
func raw(s wire.Session, seq wire.Seq, count uint16, body ...byte) []byte {
	return append(wire.AppendHeader(nil, wire.Header{Session: s, Seq: seq, Count: count}), body...)
}

type delivered struct {
	id  StreamID
	seq wire.Seq
}

type ended struct {
	id   StreamID
	next wire.Seq
}

// harness drives a core through a reader without sockets: each feed is one
// datagram handled exactly as the receive loop handles one.
type harness struct {
	t            testing.TB
	c            *core
	r            *reader
	msgs         []delivered
	gaps         []Gap
	last         map[StreamID]wire.Seq // last delivered per stream
	ends         []ended
	losses       []Loss
	resyncs      []Resync
	reqs         []wire.Request // every request poll produced
	check        bool           // verify order, gaps and losses
	checkPayload bool           // verify payloads are payload(seq)
	now          monotime.Time
}

func newHarness(t testing.TB, cfg Config) *harness {
	t.Helper()
	if !cfg.Group.IsValid() {
		cfg.Group = testGroup
	}
	h := &harness{t: t, check: true, checkPayload: true, last: map[StreamID]wire.Seq{}}
	cfg.OnMessage = h.onMessage
	cfg.OnGap = func(g Gap) {
		if last, ok := h.last[g.Stream]; ok && h.check && g.From <= last {
			h.t.Fatalf("gap %v names delivered sequence %d", g, last)
		}
		h.gaps = append(h.gaps, g)
	}
	cfg.OnEnd = func(id StreamID, next wire.Seq) { h.ends = append(h.ends, ended{id, next}) }
	cfg.OnLoss = func(l Loss) {
		if last, ok := h.last[l.Stream]; ok && h.check && last+1 != l.From {
			h.t.Fatalf("loss %v does not follow delivered sequence %d", l, last)
		}
		if h.check && l.From >= l.To {
			h.t.Fatalf("empty loss %v", l)
		}
		h.last[l.Stream] = l.To - 1
		h.losses = append(h.losses, l)
	}
	cfg.OnResync = func(r Resync) {
		h.last[r.Stream] = r.To - 1
		h.resyncs = append(h.resyncs, r)
	}
	cfg, err := cfg.withDefaults()
	require.NoError(t, err)
	h.c = newCore(cfg.core())
	h.r = &reader{c: h.c, batch: sock.NewBatch(1, 0), group: cfg.Group.Addr(), source: cfg.Source}
	if len(h.c.ask.addrs) == 0 {
		// No Retransmitter, so no repair socket in a real subscriber;
		// feedRepair still stands for one, answering from repairer.
		h.c.ask.addrs = []netip.AddrPort{repairer}
	}
	return h
}

func (h *harness) onMessage(m Message) {
	if h.checkPayload && string(m.Data) != string(payload(m.Seq)) {
		h.t.Fatalf("stream %v seq %d: payload %x, want %x", m.Stream, m.Seq, m.Data, payload(m.Seq))
	}
	if last, ok := h.last[m.Stream]; ok && h.check && last+1 != m.Seq {
		h.t.Fatalf("stream %v: delivered %d after %d", m.Stream, m.Seq, last)
	}
	h.last[m.Stream] = m.Seq
	h.msgs = append(h.msgs, delivered{m.Stream, m.Seq})
}

// feed handles one datagram from src addressed to the test group.
func (h *harness) feed(src netip.AddrPort, b []byte) {
	h.feedMsg(sock.Message{Buf: b, Addr: src, Dst: testGroup.Addr()})
}

func (h *harness) feedMsg(m sock.Message) {
	h.now += 1000
	h.r.batch.Msgs[0] = m
	h.c.mu.Lock()
	h.r.handleLocked(h.r.batch, 1, h.now)
	h.c.mu.Unlock()
}

// feedRepair handles one datagram as the unicast repair socket's reader
// would: from the retransmitter, to no group, marked as a repair.
func (h *harness) feedRepair(b []byte) { h.feedRepairFrom(h.c.ask.addrs[0], b) }

// feedRepairFrom handles one datagram from src as the unicast repair
// socket's reader would.
func (h *harness) feedRepairFrom(src netip.AddrPort, b []byte) {
	r := h.r
	saved := *r
	r.repair, r.group, r.source, r.feed = true, netip.Addr{}, netip.Addr{}, FeedRepair
	h.feedMsg(sock.Message{Buf: b, Addr: src, Dst: netip.MustParseAddr("127.0.0.1")})
	r.repair, r.group, r.source, r.feed = saved.repair, saved.group, saved.source, saved.feed
}

// poll runs the timer's work at h.now and returns the requests it made.
func (h *harness) poll() []wire.Request {
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	reqs, _, _ := h.c.poll(h.now, nil)
	h.reqs = append(h.reqs, reqs...)
	return reqs
}

// due is when the timer would wake next (false: never).
func (h *harness) due() (monotime.Time, bool) {
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	t := maxTime
	for _, s := range h.c.list {
		if s.nak != nil {
			if at, ok := h.c.due(s); ok {
				t = min(t, at)
			}
		}
	}
	return t, t != maxTime
}

// runUntil plays the timer goroutine up to t: it jumps to each time work
// falls due and polls, then leaves the clock at t. It returns the requests
// made.
func (h *harness) runUntil(t monotime.Time) []wire.Request {
	var out []wire.Request
	for range 100000 {
		at, ok := h.due()
		if !ok || at > t {
			break
		}
		h.now = max(h.now, at)
		out = append(out, h.poll()...)
	}
	h.now = max(h.now, t)
	return out
}

func (h *harness) stats() Stats {
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	return h.c.stats()
}

// stream returns the state of the latest incarnation of (src, s).
func (h *harness) stream(src netip.AddrPort, s wire.Session) StreamStats {
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	var found *StreamStats
	for _, st := range h.c.streamStats() {
		if st.ID.Source == src && st.ID.Session == s && (found == nil || st.ID.Incarnation > found.ID.Incarnation) {
			found = &st
		}
	}
	if found == nil {
		h.t.Fatalf("no stream %v/%v", src, s)
		return StreamStats{}
	}
	return *found
}

// seqs returns the delivered sequences of (src, s), all incarnations.
func (h *harness) seqs(src netip.AddrPort, s wire.Session) []wire.Seq {
	var out []wire.Seq
	for _, d := range h.msgs {
		if d.id.Source == src && d.id.Session == s {
			out = append(out, d.seq)
		}
	}
	return out
}

// seqsOf returns the delivered sequences of exactly id.
func (h *harness) seqsOf(id StreamID) []wire.Seq {
	var out []wire.Seq
	for _, d := range h.msgs {
		if d.id == id {
			out = append(out, d.seq)
		}
	}
	return out
}

func seqRange(from, to wire.Seq) []wire.Seq {
	var out []wire.Seq
	for s := from; s < to; s++ {
		out = append(out, s)
	}
	return out
}

// onlyDrops asserts that the drop counters are exactly want.
func onlyDrops(t testing.TB, st Stats, want map[DropReason]uint64) {
	t.Helper()
	var total uint64
	for r := range NumDropReasons {
		require.Equal(t, want[r], st.Drops[r], "drops for %v", r)
		total += want[r]
	}
	require.Equal(t, total, st.Dropped)
}
