package e2e

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/mdbus/mdbus/internal/netlab"
	"github.com/mdbus/mdbus/internal/sock"
	"github.com/mdbus/mdbus/internal/synth"
	"github.com/mdbus/mdbus/packetconn/impair"
	"github.com/mdbus/mdbus/publisher"
	"github.com/mdbus/mdbus/recorder"
	"github.com/mdbus/mdbus/retransmit"
	"github.com/mdbus/mdbus/subscriber"
	"github.com/mdbus/mdbus/wire"
	"github.com/stretchr/testify/require"
)

// runMessages returns the n messages publishRandom publishes with seed.
func runMessages(n int, seed uint64) [][]byte {
	gen := synth.NewRandomSizes(seed, 1, 300)
	out := make([][]byte, n)
	for i := range out {
		out[i] = gen.Next(nil)
	}
	return out
}

// byteJudge checks every delivered message against what the run of its
// source published at its sequence.
type byteJudge struct {
	mu        sync.Mutex
	runs      map[uint16][][]byte // by publisher source port (the source address is the host's pick)
	got       map[uint16]int
	stale     int
	unknown   int
	firstBad  string
	streamIDs map[subscriber.StreamID]bool
}

func newByteJudge() *byteJudge {
	return &byteJudge{runs: map[uint16][][]byte{}, got: map[uint16]int{}, streamIDs: map[subscriber.StreamID]bool{}}
}

func (j *byteJudge) run(port uint16, msgs [][]byte) {
	j.mu.Lock()
	j.runs[port] = msgs
	j.mu.Unlock()
}

func (j *byteJudge) onMessage(m subscriber.Message) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.streamIDs[m.Stream] = true
	msgs, ok := j.runs[m.Stream.Source.Port()]
	if !ok || m.Seq == 0 || int(m.Seq) > len(msgs) {
		j.unknown++
		return
	}
	if !bytes.Equal(msgs[m.Seq-1], m.Data) {
		j.stale++
		if j.firstBad == "" {
			j.firstBad = fmt.Sprintf("%v seq %d", m.Stream, m.Seq)
		}
		return
	}
	j.got[m.Stream.Source.Port()]++
}

// requireWhole asserts that no stale or unknown message was delivered and
// that the two runs of n messages each were delivered whole. j.mu must be
// held.
func (j *byteJudge) requireWhole(t *testing.T, n int) {
	t.Helper()
	require.Zero(t, j.stale, "stale bytes delivered")
	require.Zero(t, j.unknown)
	total := 0
	for _, c := range j.got {
		total += c
	}
	require.Equal(t, 2*n, total, "both runs delivered whole")
}

func (j *byteJudge) count(port uint16) int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.got[port]
}

// miniRewinder is the real rewinder (recorder.Rewinder) of feed on lo:
// it must drop a session's previous incarnation when the publisher
// restarts under the same name.
func miniRewinder(t *testing.T, feed netip.AddrPort) netip.AddrPort {
	return miniRewinderOn(t, feed, "lo", netip.MustParseAddrPort("127.0.0.1:0"))
}

// miniRewinderOn is miniRewinder joining the feed on iface and listening
// on listen.
func miniRewinderOn(t *testing.T, feed netip.AddrPort, iface string, listen netip.AddrPort) netip.AddrPort {
	t.Helper()
	rw, err := recorder.NewRewinder(recorder.RewinderConfig{Feed: feed, Interface: iface,
		Cache:  retransmit.CacheConfig{MaxBytes: 16 << 20},
		Server: retransmit.ServerConfig{Listen: listen, RequesterRateBytes: 100e6}})
	require.NoError(t, err)
	t.Cleanup(func() {
		ss := rw.ServerStats()
		t.Logf("rewinder: %d requests, %d answered, %d coalesced, %d held back (%d answered since), refused: %s",
			ss.Requests, ss.Answered, ss.Coalesced, ss.Deferred, ss.DeferredAnswered, ss.Refused)
		rw.Close()
	})
	return rw.Addr()
}

// rawRun sends msgs as session s from conn (a fixed source port) in
// packets of 10 messages, then ends the session. A raw socket has no flow
// control: it sends at most rawWindow messages ahead of what delivered
// (the receiver's count, which rawRun only compares with its own start)
// says arrived, a few hundred KiB, far within the receivers' buffers.
func rawRun(t *testing.T, conn *sock.Conn, feed netip.AddrPort, s wire.Session, msgs [][]byte, delivered func() int) {
	t.Helper()
	const rawWindow = 2000
	base := delivered()
	var e wire.Encoder
	var buf []byte
	for i := 0; i < len(msgs); i += 10 {
		e.Reset(buf[:0], s, wire.Seq(i+1), 8000)
		for _, m := range msgs[i:min(i+10, len(msgs))] {
			require.NoError(t, e.Add(m))
		}
		buf = e.Bytes()
		require.NoError(t, conn.WriteTo(buf, feed))
		if i%100 == 0 {
			// The bound only decides how long a stuck receiver takes to
			// show: the test's own wait for the whole run reports it.
			poll(10*time.Second, func() bool { return delivered()-base >= i-rawWindow })
		}
	}
	for range 3 {
		require.NoError(t, conn.WriteTo(wire.AppendEndOfSession(nil, s, wire.Seq(len(msgs)+1)), feed))
	}
}

// TestAcceptanceRestartSameSession: a rewinder holds a
// finished run of session REUSED0001; the publisher is restarted under
// the same name with other content, on a new source port or on the same
// one. A subscriber with 5% loss, repaired by the rewinder, delivers both
// runs whole, and every delivered byte is what the run of its stream
// sent: no byte of the first run is delivered as the second's, and a
// restart on the same port is not taken for duplicates of the first run.
func TestAcceptanceRestartSameSession(t *testing.T) {
	netlab.Require(t)
	n := scale(50_000, 10_000)
	ifi, err := net.InterfaceByName("lo")
	require.NoError(t, err)
	for i, samePort := range []bool{false, true} {
		t.Run(fmt.Sprint("same-port=", samePort), func(t *testing.T) {
			feed := netip.AddrPortFrom(netip.MustParseAddr("239.192.92.1"), uint16(32921+i))
			rw := miniRewinder(t, feed)
			j := newByteJudge()
			s, err := subscriber.New(subscriber.Config{Group: feed, StartSeq: 1, Recovery: subscriber.Recovery{Retransmitter: rw}, Receive: subscriber.Receive{ReorderPackets: 8192},
				Wrap:      impair.Receiver(impair.Config{Loss: 0.05, Seed: 12}),
				OnMessage: j.onMessage})
			require.NoError(t, err)
			defer s.Close()
			var raw *sock.Conn
			var pub *publisher.Publication
			if samePort {
				raw, err = sock.Open(sock.Config{Local: netip.MustParseAddrPort("0.0.0.0:0"), Interface: ifi, Loopback: true})
				require.NoError(t, err)
				defer raw.Close()
			}
			session, _ := wire.ParseSession("REUSED0001")
			for run, seed := range []uint64{101, 202} {
				msgs := runMessages(n, seed)
				var port uint16
				if samePort {
					port = raw.LocalAddr().Port()
					j.run(port, msgs)
					rawRun(t, raw, feed, session, msgs, func() int { return j.count(port) })
				} else {
					pub, err = publisher.New(publisher.Config{Group: feed, Session: "REUSED0001", RateMessages: 50_000, HeartbeatInterval: 20 * time.Millisecond})
					require.NoError(t, err)
					port = pub.LocalAddr().Port()
					j.run(port, msgs)
					publishRandom(t, pub, n, seed, 1, 300)
					defer pub.Close()
				}
				deadline := time.Now().Add(60 * time.Second)
				poll(time.Until(deadline), func() bool { return j.count(port) >= n*(1+run*btoi(samePort)) })
				if !samePort {
					require.NoError(t, pub.Close()) // the end of session; the next run restarts it
				}
				t.Logf("run %d from port %d: %d delivered byte-identical so far", run+1, port, j.count(port))
			}
			st := s.Stats()
			j.mu.Lock()
			defer j.mu.Unlock()
			t.Logf("stale %d (first %q), unknown %d, streams %v; subscriber: recovered %d, lost %d, incarnations %d, suspect restarts %d",
				j.stale, j.firstBad, j.unknown, j.streamIDs, st.Recovered, st.LostMessages, st.Incarnations, st.SuspectRestarts)
			j.requireWhole(t, n)
			require.Len(t, j.streamIDs, 2)
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
