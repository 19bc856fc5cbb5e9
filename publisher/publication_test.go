package publisher_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mdbus/mdbus/internal/netlab"
	"github.com/mdbus/mdbus/internal/sock"
	"github.com/mdbus/mdbus/publisher"
	"github.com/mdbus/mdbus/wire"
	"github.com/stretchr/testify/require"
)

// sendMode is SendInline when inline is set, else SendAuto.
func sendMode(inline bool) publisher.SendMode {
	if inline {
		return publisher.SendInline
	}
	return publisher.SendAuto
}

// open starts a publication and closes it at the end of the test.
func open(t testing.TB, cfg publisher.Config) *publisher.Publication {
	t.Helper()
	p, err := publisher.New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	return p
}

func TestSequencesContiguous(t *testing.T) {
	netlab.Require(t)
	for i, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			group := netip.AddrPortFrom(netip.MustParseAddr("239.10.0.1"), uint16(31000+i))
			rx := listen(t, group, "lo")
			p := open(t, publisher.Config{Group: group, Send: mode.send, Session: "SEQTEST"})
			require.Equal(t, wire.Seq(1), p.NextSeq())

			const total, window = 20000, 500
			var pkts []packet
			for seq := wire.Seq(1); seq <= total; {
				last := min(seq+window-1, total)
				for ; seq <= last; seq++ {
					got, err := p.Publish(makeMsg(seq, 0, 1+int(seq*7919%300)))
					require.NoError(t, err)
					require.Equal(t, seq, got)
				}
				pkts = append(pkts, rx.data(5*time.Second, last)...)
			}
			msgs := checkContiguous(t, pkts, 1, wire.DefaultPayloadSizeIPv4)
			require.Len(t, msgs, total)
			for i, m := range msgs {
				seq := wire.Seq(i + 1)
				require.Equal(t, makeMsg(seq, 0, 1+int(seq*7919%300)), m, "message %d", seq)
			}
			sess, _ := wire.ParseSession("SEQTEST")
			for _, pk := range pkts {
				require.Equal(t, sess, pk.Session)
				require.Equal(t, p.LocalAddr().Port(), pk.src.Port())
			}
			require.NoError(t, p.Flush(context.Background()))
			st := p.Stats()
			require.EqualValues(t, total, st.Published)
			require.EqualValues(t, total, st.Messages)
			require.EqualValues(t, len(pkts), st.Packets)
			require.Zero(t, st.SendErrors)
			require.Equal(t, wire.Seq(total+1), p.NextSeq())
			t.Logf("%d messages in %d packets, %d WriteBatch calls, %d inline sends",
				total, st.Packets, st.WriteBatches, st.InlineSends)
		})
	}
}

func TestPacksFullPackets(t *testing.T) {
	netlab.Require(t)
	for i, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			group := netip.AddrPortFrom(netip.MustParseAddr("239.10.0.2"), uint16(31010+i))
			rx := listen(t, group, "lo")
			p := open(t, publisher.Config{Group: group, Send: mode.send})
			const n, size = 1000, 50
			batch := make([][]byte, n)
			for i := range batch {
				batch[i] = makeMsg(wire.Seq(i+1), 0, size)
			}
			first, err := p.PublishBatch(batch)
			require.NoError(t, err)
			require.Equal(t, wire.Seq(1), first)
			pkts := rx.data(5*time.Second, n)
			msgs := checkContiguous(t, pkts, 1, wire.DefaultPayloadSizeIPv4)
			require.Equal(t, batch, msgs)
			perPacket := (wire.DefaultPayloadSizeIPv4 - wire.HeaderLen) / (size + wire.MsgLenLen)
			require.Len(t, pkts, (n+perPacket-1)/perPacket)
			for _, pk := range pkts[:len(pkts)-1] {
				require.Equal(t, perPacket, pk.MessageCount(), "every packet but the last is full")
			}
			st := p.Stats()
			require.LessOrEqual(t, st.WriteBatches, uint64(2), "one batch goes out in one or two WriteBatch calls")
		})
	}
}

// TestPacksUnderLoad publishes in a tight loop from one goroutine: the
// sending goroutine then finds many messages pending each time it wakes
// (group commit), so packets carry many messages and go out several per
// WriteBatch. With Inline each message leaves alone, inside its Publish.
func TestPacksUnderLoad(t *testing.T) {
	netlab.Require(t)
	for i, mode := range modes {
		t.Run(mode.name, func(t *testing.T) { packsUnderLoad(t, uint16(31020+i), mode.send == publisher.SendInline) })
	}
}

// publishTight publishes n messages of size bytes from one goroutine as
// fast as Publish takes them, flushes, and returns the data packets rx
// received, checked contiguous from 1.
func publishTight(t *testing.T, rx *receiver, p *publisher.Publication, n, size int) []packet {
	t.Helper()
	msg := make([]byte, size)
	for range n {
		_, err := p.Publish(msg)
		require.NoError(t, err)
	}
	require.NoError(t, p.Flush(context.Background()))
	pkts := rx.data(5*time.Second, wire.Seq(n))
	checkContiguous(t, pkts, 1, wire.DefaultPayloadSizeIPv4)
	return pkts
}

func packsUnderLoad(t *testing.T, port uint16, inline bool) {
	group := netip.AddrPortFrom(netip.MustParseAddr("239.10.0.3"), port)
	rx := listen(t, group, "lo")
	p := open(t, publisher.Config{Group: group, Send: sendMode(inline)})
	const n = 5000
	publishTight(t, rx, p, n, 40)
	st := p.Stats()
	t.Logf("%d messages: %d packets (%.1f messages/packet), %d WriteBatch calls (%.1f packets/call)",
		n, st.Packets, float64(n)/float64(st.Packets), st.WriteBatches, float64(st.Packets)/float64(st.WriteBatches))
	if inline {
		// One goroutine never publishes during its own send: with
		// Inline every message leaves at once, alone (as documented).
		require.EqualValues(t, n, st.Packets)
		require.EqualValues(t, n, st.InlineSends)
		return
	}
	// Typically 20-30 messages per packet; the bound is loose for slow
	// (race-enabled, loaded) runs.
	require.Less(t, st.Packets*2, uint64(n), "at a high rate packets carry many messages")
}

// TestPromptSingleMessage: a lone message goes out at once, with no timer
// or flush interval in its way. On virtual time (bubble_test.go) "at once"
// is exact: the packet is handed to the kernel at the instant of Publish,
// so what a loaded machine does to wall time cannot fail the test, and a
// timer of any length on the path would.
func TestPromptSingleMessage(t *testing.T) {
	netlab.Require(t)
	for i, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				group := netip.AddrPortFrom(netip.MustParseAddr("239.10.0.4"), uint16(31030+i))
				p, cc := openCaptured(t, publisher.Config{Group: group, Send: mode.send})
				var worst time.Duration
				lat := make([]time.Duration, 0, 20)
				for range 20 {
					advance(2 * time.Millisecond)
					start := time.Now()
					seq, err := p.Publish([]byte("hello"))
					require.NoError(t, err)
					synctest.Wait()
					sent := cc.sent()
					last := sent[len(sent)-1]
					require.Equal(t, seq, last.Seq)
					d := last.at.Sub(start)
					lat = append(lat, d)
					worst = max(worst, d)
				}
				slices.Sort(lat)
				require.Less(t, lat[len(lat)/2], 50*time.Millisecond, "a lone message goes out at once")
				require.Less(t, lat[len(lat)*3/4], 50*time.Millisecond, "a lone message goes out at once")
				require.Zero(t, worst, "no timer delays a lone message")
			})
		})
	}
}

func TestHeartbeat(t *testing.T) {
	netlab.Require(t)
	for i, tc := range []struct {
		name  string
		first wire.Seq
	}{
		{"from-1", 0},
		{"from-100", 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				group := netip.AddrPortFrom(netip.MustParseAddr("239.10.0.5"), uint16(31040+i))
				const interval = 20 * time.Millisecond
				start := time.Now()
				p, cc := openCaptured(t, publisher.Config{Group: group, HeartbeatInterval: interval, FirstSeq: tc.first})
				first := max(tc.first, 1)

				// Idle from the start: heartbeats announce the first sequence.
				advance(interval)
				got := cc.sent()
				require.Len(t, got, 1)
				require.True(t, got[0].IsHeartbeat())
				require.Equal(t, first, got[0].Seq)
				require.Equal(t, p.Session(), got[0].Session)
				require.Equal(t, interval, got[0].at.Sub(start), "after one interval of silence")

				for k := range 3 {
					_, err := p.Publish([]byte{byte(k)})
					require.NoError(t, err)
				}
				synctest.Wait()
				require.Len(t, checkContiguous(t, cc.data(), first, wire.DefaultPayloadSizeIPv4), 3)
				lastData := cc.sent()[len(cc.sent())-1].at

				// Idle again: heartbeats carry the next sequence, spaced by the interval.
				advance(4 * interval)
				var stamps []time.Time
				for _, pk := range cc.sent() {
					if !pk.at.After(lastData) {
						continue
					}
					require.True(t, pk.IsHeartbeat(), "only heartbeats while idle, got %+v", pk.Header)
					require.Equal(t, first+3, pk.Seq)
					require.Empty(t, pk.msgs)
					stamps = append(stamps, pk.at)
				}
				require.Len(t, stamps, 4)
				require.Equal(t, interval, stamps[0].Sub(lastData), "the first after an interval of silence")
				for k := 1; k < len(stamps); k++ {
					require.Greater(t, stamps[k].Sub(stamps[k-1]), interval/2, "heartbeats are spaced by the interval")
					require.Equal(t, interval, stamps[k].Sub(stamps[k-1]), "heartbeats are spaced by the interval")
				}
				require.GreaterOrEqual(t, p.Stats().Heartbeats, uint64(5))
			})
		})
	}
}

func TestHeartbeatDisabled(t *testing.T) {
	netlab.Require(t)
	synctest.Test(t, func(t *testing.T) {
		p, cc := openCaptured(t, publisher.Config{Group: netip.MustParseAddrPort("239.10.0.6:31050"), HeartbeatInterval: -1})
		advance(time.Hour)
		require.Empty(t, cc.sent())
		require.Zero(t, p.Stats().Heartbeats)
	})
}

func TestEndOfSession(t *testing.T) {
	netlab.Require(t)
	for i, tc := range []struct {
		name string
		msgs int
	}{
		{"after-messages", 5},
		{"empty-session", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			group := netip.AddrPortFrom(netip.MustParseAddr("239.10.0.7"), uint16(31060+i))
			rx := listen(t, group, "lo")
			p, err := publisher.New(publisher.Config{Group: group, HeartbeatInterval: -1})
			require.NoError(t, err)
			for k := range tc.msgs {
				_, err := p.Publish([]byte{byte(k)})
				require.NoError(t, err)
			}
			// Close flushes the messages before it ends the session.
			require.NoError(t, p.Close())
			got := rx.until(5*time.Second, func(p packet) bool { return p.IsEndOfSession() })
			var data []packet
			for _, pk := range got[:len(got)-1] {
				data = append(data, pk)
			}
			require.Len(t, checkContiguous(t, data, 1, wire.DefaultPayloadSizeIPv4), tc.msgs)
			eos := got[len(got)-1]
			require.Equal(t, wire.Seq(tc.msgs+1), eos.Seq)
			require.Equal(t, p.Session(), eos.Session)
			require.EqualValues(t, 1, p.Stats().EndOfSession)
			rx.silent(50 * time.Millisecond)
		})
	}
}

func TestIPv6(t *testing.T) {
	netlab.Require(t)
	for i, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			group := netip.AddrPortFrom(netip.MustParseAddr("ff15::10:1"), uint16(31070+i))
			rx := listen(t, group, netlab.VethA)
			p := open(t, publisher.Config{Group: group, Interface: netlab.VethA, Send: mode.send, HeartbeatInterval: -1})
			require.True(t, p.LocalAddr().Addr().Is6())
			require.Equal(t, wire.DefaultPayloadSizeIPv6, p.PayloadSize())
			const n = 300
			batch := make([][]byte, n)
			for k := range batch {
				batch[k] = makeMsg(wire.Seq(k+1), 6, 100)
			}
			_, err := p.PublishBatch(batch[:n/2])
			require.NoError(t, err)
			for _, m := range batch[n/2:] {
				_, err := p.Publish(m)
				require.NoError(t, err)
			}
			pkts := rx.data(5*time.Second, n)
			require.Equal(t, batch, checkContiguous(t, pkts, 1, wire.DefaultPayloadSizeIPv6))
			require.NoError(t, p.Close())
			got := rx.until(5*time.Second, func(p packet) bool { return p.IsEndOfSession() })
			require.Equal(t, wire.Seq(n+1), got[len(got)-1].Seq)
		})
	}
}

func TestSinks(t *testing.T) {
	netlab.Require(t)
	for i, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				group := netip.AddrPortFrom(netip.MustParseAddr("239.10.0.8"), uint16(31080+i))
				s1, s2 := &recordingSink{}, &recordingSink{}
				p, cc := openCaptured(t, publisher.Config{
					Group: group, Send: mode.send, HeartbeatInterval: 5 * time.Millisecond,
					Sinks: []publisher.Sink{s1, s2}, Grace: -1,
				})
				for round := range 4 {
					for k := range 500 {
						_, err := p.Publish(makeMsg(wire.Seq(round*500+k+1), 1, 1+k%200))
						require.NoError(t, err)
					}
					advance(15 * time.Millisecond) // idle: heartbeats, which sinks do not see
				}
				require.NoError(t, p.Close())
				pkts := cc.data()
				require.Len(t, checkContiguous(t, pkts, 1, wire.DefaultPayloadSizeIPv4), 2000)
				st := p.Stats()
				require.Positive(t, st.Heartbeats)
				for _, s := range []*recordingSink{s1, s2} {
					got := s.packets()
					require.Len(t, got, len(pkts))
					require.EqualValues(t, st.Packets, len(got))
					for k, raw := range got {
						require.Equal(t, pkts[k].raw, raw, "sink packet %d equals what was sent", k)
					}
				}
			})
		})
	}
}

// TestRateLimit runs on virtual time (bubble_test.go), where a rate wait
// lasts exactly what the bucket says: the bounds below hold on any machine.
func TestRateLimit(t *testing.T) {
	netlab.Require(t)
	const n = 300
	for i, tc := range []struct {
		name  string
		cfg   publisher.Config
		size  int
		batch bool
		want  time.Duration // the time the rate implies, less the burst
	}{
		{"messages", publisher.Config{RateMessages: 2000}, 20, false, (n - 20) * time.Second / 2000},
		{"messages-batch", publisher.Config{RateMessages: 2000}, 20, true, (n - 20) * time.Second / 2000},
		// Each message pays its length prefix and, sent alone, a header.
		{"bytes", publisher.Config{RateBytes: 100_000}, 100, false,
			time.Duration(float64(n*(100+2+20)-wire.DefaultPayloadSizeIPv4) / 100_000 * float64(time.Second))},
		{"messages-inline", publisher.Config{RateMessages: 2000, Send: publisher.SendInline}, 20, false, (n - 20) * time.Second / 2000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				group := netip.AddrPortFrom(netip.MustParseAddr("239.10.0.9"), uint16(31090+i))
				cfg := tc.cfg
				cfg.Group, cfg.HeartbeatInterval = group, -1
				p, cc := openCaptured(t, cfg)
				msgs := make([][]byte, n)
				for k := range msgs {
					msgs[k] = makeMsg(wire.Seq(k+1), 2, tc.size)
				}
				start := time.Now()
				if tc.batch {
					_, err := p.PublishBatch(msgs)
					require.NoError(t, err)
				} else {
					for _, m := range msgs {
						_, err := p.Publish(m)
						require.NoError(t, err)
					}
				}
				took := time.Since(start)
				synctest.Wait()
				pkts := cc.data()
				require.Equal(t, msgs, checkContiguous(t, pkts, 1, wire.DefaultPayloadSizeIPv4))
				st := p.Stats()
				t.Logf("took %v (rate implies %v), %d packets, %d rate waits", took, tc.want, st.Packets, st.RateWaits)
				require.Greater(t, took, tc.want*7/10, "the rate limit holds publishers back")
				require.Less(t, took, tc.want*3+time.Second, "the rate limit does not hold them back much more")
				require.InDelta(t, float64(tc.want), float64(took), float64(tc.want)/20, "on virtual time the pace is the rate")
				require.Positive(t, st.RateWaits)
				require.Greater(t, len(pkts), n/10, "paced messages go out in many packets, not one burst")
			})
		})
	}
}

func TestRateLimitCloseInterrupts(t *testing.T) {
	netlab.Require(t)
	synctest.Test(t, func(t *testing.T) {
		p, _ := openCaptured(t, publisher.Config{Group: netip.MustParseAddrPort("239.10.0.10:31100"), RateMessages: 1})
		_, err := p.Publish([]byte("a")) // spends the one-message burst
		require.NoError(t, err)
		done := make(chan error, 1)
		go func() {
			_, err := p.PublishBatch([][]byte{[]byte("b"), []byte("c")})
			done <- err
		}()
		synctest.Wait() // PublishBatch waits for the rate
		queued := make(chan error, 1)
		go func() { // and this one for its turn
			_, err := p.Publish([]byte("d"))
			queued <- err
		}()
		synctest.Wait()
		start := time.Now()
		require.NoError(t, p.Close())
		require.Less(t, time.Since(start), 500*time.Millisecond, "Close interrupts a rate wait")
		select {
		case err := <-done:
			require.ErrorIs(t, err, publisher.ErrClosed)
			require.Contains(t, err.Error(), "0 of the batch's 2 messages")
		case <-time.After(2 * time.Second):
			t.Fatal("PublishBatch still blocked after Close")
		}
		require.ErrorIs(t, <-queued, publisher.ErrClosed, "a publisher waiting for its turn is interrupted too")
		require.Equal(t, wire.Seq(2), p.NextSeq())
	})
}

func TestConfigErrors(t *testing.T) {
	netlab.Require(t)
	g := netip.MustParseAddrPort("239.10.0.11:31110")
	for _, tc := range []struct {
		name    string
		cfg     publisher.Config
		is      error
		mention string
	}{
		{"no-group", publisher.Config{}, publisher.ErrBadGroup, "required"},
		{"unicast-group", publisher.Config{Group: netip.MustParseAddrPort("10.1.2.3:5000")}, publisher.ErrBadGroup, "10.1.2.3"},
		{"unicast-v6-group", publisher.Config{Group: netip.MustParseAddrPort("[fd77::9]:5000")}, publisher.ErrBadGroup, "fd77::9"},
		{"port-0", publisher.Config{Group: netip.MustParseAddrPort("239.1.1.1:0")}, publisher.ErrBadGroup, "port 0"},
		{"no-interface", publisher.Config{Group: g, Interface: "nosuch0"}, publisher.ErrNoInterface, `"nosuch0" (this host has: lo`},
		{"payload-small", publisher.Config{Group: g, PayloadSize: wire.MinPayloadSize - 1}, publisher.ErrConfig, "PayloadSize"},
		{"payload-large", publisher.Config{Group: g, PayloadSize: wire.MaxPayloadSize + 1}, publisher.ErrConfig, "PayloadSize"},
		{"payload-negative", publisher.Config{Group: g, PayloadSize: -1}, publisher.ErrConfig, "PayloadSize"},
		{"ttl", publisher.Config{Group: g, TTL: 256}, publisher.ErrConfig, "TTL"},
		{"session-long", publisher.Config{Group: g, Session: "ELEVENCHARS"}, publisher.ErrConfig, "session"},
		{"session-binary", publisher.Config{Group: g, Session: "a\x01"}, wire.ErrBadSession, "session"},
		{"source-family", publisher.Config{Group: g, Source: netip.MustParseAddr("::1")}, publisher.ErrConfig, "families"},
		{"batch", publisher.Config{Group: g, BatchPackets: 2000}, publisher.ErrConfig, "BatchPackets"},
		{"queue", publisher.Config{Group: g, QueuePackets: -1}, publisher.ErrConfig, "QueuePackets"},
		{"rate", publisher.Config{Group: g, RateBytes: -5}, publisher.ErrConfig, "rate"},
		{"linger-negative", publisher.Config{Group: g, Linger: -1}, publisher.ErrConfig, "Linger"},
		{"linger-long", publisher.Config{Group: g, Linger: publisher.MaxLinger + 1}, publisher.ErrConfig, "Linger"},
		{"linger-inline", publisher.Config{Group: g, Linger: time.Millisecond, Send: publisher.SendInline}, publisher.ErrConfig, "Inline"},
		{"linger-inline-deprecated", publisher.Config{Group: g, Linger: time.Millisecond, Inline: true}, publisher.ErrConfig, "Inline"},
		{"send-unknown", publisher.Config{Group: g, Send: publisher.SendBackground + 1}, publisher.ErrConfig, "Send"},
		{"inline-and-background", publisher.Config{Group: g, Inline: true, Background: true}, publisher.ErrConfig, "Background"},
		{"inline-and-send", publisher.Config{Group: g, Inline: true, Send: publisher.SendBackground}, publisher.ErrConfig, "Inline"},
		{"nil-sink", publisher.Config{Group: g, Sinks: []publisher.Sink{nil}}, publisher.ErrConfig, "Sinks[0]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := publisher.New(tc.cfg)
			require.Nil(t, p)
			require.ErrorIs(t, err, tc.is)
			require.Contains(t, err.Error(), tc.mention)
			require.True(t, strings.HasPrefix(err.Error(), "publisher: ") || errors.Is(err, wire.ErrBadSession), err.Error())
		})
	}
}

func TestMessageTooLarge(t *testing.T) {
	netlab.Require(t)
	for i, size := range []int{0, 200, 9000} {
		t.Run(fmt.Sprintf("payload-%d", size), func(t *testing.T) {
			group := netip.AddrPortFrom(netip.MustParseAddr("239.10.0.12"), uint16(31120+i))
			rx := listen(t, group, "lo")
			p := open(t, publisher.Config{Group: group, PayloadSize: size, HeartbeatInterval: -1})
			limit := p.MaxMessageLen()
			require.Equal(t, wire.MaxMessageLen(p.PayloadSize()), limit)

			_, err := p.Publish(make([]byte, limit+1))
			require.ErrorIs(t, err, publisher.ErrMessageTooLarge)
			require.ErrorIs(t, err, wire.ErrMessageTooLarge)
			require.Contains(t, err.Error(), fmt.Sprintf("the limit is %d", limit))

			_, err = p.PublishBatch([][]byte{{1}, make([]byte, limit+1), {2}})
			require.ErrorIs(t, err, wire.ErrMessageTooLarge)
			require.Contains(t, err.Error(), "message 1 of the batch; none published")
			require.Equal(t, wire.Seq(1), p.NextSeq(), "nothing was published")
			require.Zero(t, p.Stats().Published)

			// The largest message fits, alone, in a packet of exactly PayloadSize.
			big := makeMsg(1, 3, limit)
			seq, err := p.Publish(big)
			require.NoError(t, err)
			pkts := rx.data(5*time.Second, seq)
			require.Len(t, pkts, 1)
			require.Equal(t, p.PayloadSize(), pkts[0].size)
			require.Equal(t, [][]byte{big}, pkts[0].msgs)
		})
	}
}

func TestClose(t *testing.T) {
	netlab.Require(t)
	p, err := publisher.New(publisher.Config{Group: netip.MustParseAddrPort("239.10.0.13:31130")})
	require.NoError(t, err)
	_, err = p.Publish([]byte("x"))
	require.NoError(t, err)
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for k := range errs {
		wg.Go(func() { errs[k] = p.Close() })
	}
	wg.Wait()
	first := 0
	for _, err := range errs {
		if err == nil {
			first++
		} else {
			require.ErrorIs(t, err, publisher.ErrClosed, "the other calls wait for the first and say it was closed")
		}
	}
	require.Equal(t, 1, first, "one Close closes")
	require.ErrorIs(t, p.Close(), publisher.ErrClosed, "Close again")
	_, err = p.Publish([]byte("y"))
	require.ErrorIs(t, err, publisher.ErrClosed)
	_, err = p.PublishBatch([][]byte{[]byte("y")})
	require.ErrorIs(t, err, publisher.ErrClosed)
	require.ErrorIs(t, p.Flush(context.Background()), publisher.ErrClosed)
	require.Equal(t, wire.Seq(2), p.NextSeq())
	st := p.Stats()
	require.EqualValues(t, 1, st.Published)
	require.EqualValues(t, 1, st.Messages)
	require.EqualValues(t, 1, st.EndOfSession)
}

// TestConcurrentPublishers: four writers publish at once; every message
// arrives once, in each writer's order. With fast sends, whether a Publish
// arrives during another's send depends on the scheduler (on CI's two
// loaded cores 6,918 of 7,102 packets went out alone), so only order and
// content are checked, on the real socket. A send slowed to 200 µs makes
// every writer arrive during one: their messages must then share packets.
// That case runs on virtual time (bubble_test.go): on wall time a writer
// descheduled for longer than a send (two cores shared with CPU hogs)
// finds the role free and sends its lone message inline, so how many
// messages shared packets measured the scheduler, not the publisher
// (once 10984/4 packets for 10000 messages); in the bubble the slow send
// lasts 200 µs of virtual time, which passes only when every writer is
// blocked.
func TestConcurrentPublishers(t *testing.T) {
	netlab.Require(t)
	for i, c := range []struct {
		name  string
		send  publisher.SendMode
		delay time.Duration
	}{
		{"goroutine", publisher.SendAuto, 0},
		{"inline", publisher.SendInline, 0},
		{"goroutine/slow-send", publisher.SendAuto, 200 * time.Microsecond},
		{"inline/slow-send", publisher.SendInline, 200 * time.Microsecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			group := netip.AddrPortFrom(netip.MustParseAddr("239.10.0.14"), uint16(31140+i))
			cfg := publisher.Config{Group: group, Send: c.send}
			if c.delay == 0 {
				rx := listen(t, group, "lo")
				p := open(t, cfg)
				concurrentPublishers(t, p, func() []packet { return rx.data(20*time.Second, writers*each) })
				return
			}
			synctest.Test(t, func(t *testing.T) {
				cfg.Wrap = func(pc sock.PacketConn) sock.PacketConn {
					return &faultyConn{PacketConn: pc, delay: c.delay}
				}
				p, cc := openCaptured(t, cfg)
				concurrentPublishers(t, p, func() []packet {
					require.NoError(t, p.Flush(context.Background()))
					return cc.data()
				})
				st := p.Stats()
				// Publishers that come during a send leave their messages
				// to the one sending, which packs them, inline or not.
				require.Less(t, st.Packets*4, uint64(writers*each), "concurrent publishers' messages share packets")
			})
		})
	}
}

const writers, each = 4, 2500

// concurrentPublishers runs the writers of TestConcurrentPublishers on p
// and checks what received returns once they are done.
func concurrentPublishers(t *testing.T, p *publisher.Publication, received func() []packet) {
	seqs := make([][]wire.Seq, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for k := range each {
				var err error
				var seq wire.Seq
				msg := makeMsg(wire.Seq(k), byte(w), 20+k%50)
				if k%10 == 0 {
					seq, err = p.PublishBatch([][]byte{msg})
				} else {
					seq, err = p.Publish(msg)
				}
				if err != nil {
					t.Error(err)
					return
				}
				seqs[w] = append(seqs[w], seq)
			}
		})
	}
	wg.Wait()
	pkts := received()
	msgs := checkContiguous(t, pkts, 1, wire.DefaultPayloadSizeIPv4)
	require.Len(t, msgs, writers*each)
	for w, ss := range seqs {
		require.Len(t, ss, each)
		require.True(t, slices.IsSorted(ss), "a writer's sequences increase")
		for k, seq := range ss {
			require.Equal(t, makeMsg(wire.Seq(k), byte(w), 20+k%50), msgs[seq-1])
		}
	}
	st := p.Stats()
	t.Logf("%d messages in %d packets, %d sent inline", writers*each, st.Packets, st.InlineSends)
}

// TestBackpressure: two publishers contend for two buffers behind a slow
// send; they wait (QueueFull) and nothing is lost or reordered. On
// virtual time (bubble_test.go), so the slow send is slow on any machine.
func TestBackpressure(t *testing.T) {
	netlab.Require(t)
	for i, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				group := netip.AddrPortFrom(netip.MustParseAddr("239.10.0.15"), uint16(31150+i))
				p, cc := openCaptured(t, publisher.Config{
					Group: group, Send: mode.send, PayloadSize: 100, QueuePackets: 2, BatchPackets: 1,
					Wrap: func(c sock.PacketConn) sock.PacketConn {
						return &faultyConn{PacketConn: c, delay: 200 * time.Microsecond}
					},
				})
				const n = 400
				done := make(chan struct{})
				go func() { // a second publisher contends for the two buffers
					defer close(done)
					for range 20 {
						if _, err := p.PublishBatch([][]byte{make([]byte, 30), make([]byte, 30)}); err != nil {
							t.Error(err)
							return
						}
					}
				}()
				for range n {
					_, err := p.Publish(make([]byte, 30))
					require.NoError(t, err)
				}
				<-done
				require.NoError(t, p.Flush(context.Background()))
				require.Len(t, checkContiguous(t, cc.data(), 1, 100), n+40)
				require.Positive(t, p.Stats().QueueFull, "publishers waited for buffers")
			})
		})
	}
}

func TestSendErrorLatched(t *testing.T) {
	netlab.Require(t)
	for i, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			group := netip.AddrPortFrom(netip.MustParseAddr("239.10.0.16"), uint16(31160+i))
			rx := listen(t, group, "lo")
			var fc *faultyConn
			sink := &recordingSink{}
			p := open(t, publisher.Config{
				Group: group, Send: mode.send, HeartbeatInterval: -1, Sinks: []publisher.Sink{sink}, Grace: -1,
				Wrap: func(c sock.PacketConn) sock.PacketConn { fc = &faultyConn{PacketConn: c}; return fc },
			})
			// Ten packets of one message each go out in one WriteBatch;
			// the kernel refuses the second.
			fc.failAt.Store(2)
			fc.failN.Store(1)
			batch := make([][]byte, 10)
			for k := range batch {
				batch[k] = makeMsg(wire.Seq(k+1), 4, 1000)
			}
			_, err := p.PublishBatch(batch)
			require.NoError(t, err)
			err = p.Flush(context.Background())
			require.ErrorIs(t, err, errInjected)
			require.Contains(t, err.Error(), group.String())
			require.NoError(t, p.Flush(context.Background()), "an error is reported once")

			pkts := rx.data(5*time.Second, 10)
			var seqs []wire.Seq
			for _, pk := range pkts {
				seqs = append(seqs, pk.Seq)
			}
			require.Equal(t, []wire.Seq{1, 3, 4, 5, 6, 7, 8, 9, 10}, seqs, "the refused packet is skipped, the rest sent")
			st := p.Stats()
			require.EqualValues(t, 1, st.SendErrors)
			require.EqualValues(t, 9, st.Packets)
			require.EqualValues(t, 9, st.Messages)
			require.Len(t, sink.packets(), 10, "sinks get the refused packet too: its sequence is spent")

			// A failure in the background is returned by the next Publish.
			fc.failAt.Store(1)
			fc.failN.Store(1)
			_, err = p.Publish([]byte("lost")) // sent inline or not, the error is latched
			require.NoError(t, err)
			require.Eventually(t, func() bool { return p.Stats().SendErrors == 2 }, 5*time.Second, time.Millisecond)
			_, err = p.Publish([]byte("refused"))
			require.ErrorIs(t, err, errInjected, "the next Publish reports it and publishes nothing")
			require.Equal(t, wire.Seq(12), p.NextSeq())
			seq, err := p.Publish([]byte("ok"))
			require.NoError(t, err)
			require.Equal(t, wire.Seq(12), seq)
			pkts = rx.data(5*time.Second, 12)
			require.Equal(t, wire.Seq(12), pkts[len(pkts)-1].Seq)
			require.NoError(t, p.Close())
		})
	}
}

func TestFlushContext(t *testing.T) {
	netlab.Require(t)
	synctest.Test(t, func(t *testing.T) {
		gate := make(chan struct{})
		p, _ := openCaptured(t, publisher.Config{
			Group: netip.MustParseAddrPort("239.10.0.17:31170"), HeartbeatInterval: -1,
			Wrap: func(c sock.PacketConn) sock.PacketConn { return &faultyConn{PacketConn: c, gate: gate} },
		})
		_, err := p.Publish([]byte("held"))
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
		defer cancel()
		require.ErrorIs(t, p.Flush(ctx), context.DeadlineExceeded)
		close(gate)
		require.NoError(t, p.Flush(context.Background()))
		require.EqualValues(t, 1, p.Stats().Packets)
	})
}

func TestSourceAddress(t *testing.T) {
	netlab.Require(t)
	group := netip.MustParseAddrPort("239.10.0.18:31180")
	rx := listen(t, group, "lo")
	src := netip.MustParseAddr("127.0.0.2")
	p := open(t, publisher.Config{Group: group, Source: src})
	require.Equal(t, src, p.LocalAddr().Addr())
	seq, err := p.Publish([]byte("from 127.0.0.2"))
	require.NoError(t, err)
	pkts := rx.data(5*time.Second, seq)
	require.Equal(t, p.LocalAddr(), pkts[0].src)
}

// TestDisableLoopback uses IPv6 on the veth: lo delivers what is sent
// through it whatever IP_MULTICAST_LOOP says.
func TestDisableLoopback(t *testing.T) {
	netlab.Require(t)
	group := netip.MustParseAddrPort("[ff15::10:19]:31190")
	rx := listen(t, group, netlab.VethA)
	p := open(t, publisher.Config{Group: group, Interface: netlab.VethA, DisableLoopback: true})
	_, err := p.Publish([]byte("unheard"))
	require.NoError(t, err)
	require.NoError(t, p.Flush(context.Background()))
	require.EqualValues(t, 1, p.Stats().Packets)
	rx.silent(100 * time.Millisecond)
}

func TestSessionName(t *testing.T) {
	netlab.Require(t)
	g := netip.MustParseAddrPort("239.10.0.20:31200")
	p1 := open(t, publisher.Config{Group: g})
	p2 := open(t, publisher.Config{Group: g})
	require.True(t, p1.Session().Valid())
	require.Len(t, p1.Session().String(), wire.SessionLen, "a generated session uses all 10 characters")
	require.NotEqual(t, p1.Session(), p2.Session(), "each publication gets its own session")
	p3 := open(t, publisher.Config{Group: g, Session: "FEED1"})
	sess := p3.Session()
	require.Equal(t, "FEED1     ", string(sess[:]))
}

func TestZeroAllocs(t *testing.T) {
	netlab.Require(t)
	msg64 := make([]byte, 64)
	batch := [][]byte{msg64, msg64, msg64}
	full := make([][]byte, 50) // two full packets and a lingering one: sent inline, the timer armed by the caller
	for i := range full {
		full[i] = msg64
	}
	for i, tc := range []struct {
		name string
		cfg  publisher.Config
		f    func(p *publisher.Publication) error
	}{
		{"publish", publisher.Config{}, func(p *publisher.Publication) error { _, err := p.Publish(msg64); return err }},
		{"publish-inline", publisher.Config{Send: publisher.SendInline}, func(p *publisher.Publication) error { _, err := p.Publish(msg64); return err }},
		{"publish-batch", publisher.Config{}, func(p *publisher.Publication) error { _, err := p.PublishBatch(batch); return err }},
		{"publish-rate-limited", publisher.Config{RateMessages: 1e6, RateBytes: 1e9}, func(p *publisher.Publication) error { _, err := p.Publish(msg64); return err }},
		{"publish-with-sink", publisher.Config{Sinks: []publisher.Sink{nopSink{}}, Grace: -1}, func(p *publisher.Publication) error { _, err := p.Publish(msg64); return err }},
		{"publish-linger", publisher.Config{Linger: 100 * time.Microsecond}, func(p *publisher.Publication) error { _, err := p.Publish(msg64); return err }},
		{"publish-batch-linger", publisher.Config{Linger: 100 * time.Microsecond}, func(p *publisher.Publication) error { _, err := p.PublishBatch(full); return err }},
		{"publish-background", publisher.Config{Send: publisher.SendBackground}, func(p *publisher.Publication) error { _, err := p.Publish(msg64); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.Group = netip.AddrPortFrom(netip.MustParseAddr("239.10.0.21"), uint16(31210+i))
			p := open(t, cfg)
			for range 5000 { // warm: every ring buffer used once
				require.NoError(t, tc.f(p))
			}
			allocs := testing.AllocsPerRun(5000, func() {
				if err := tc.f(p); err != nil {
					t.Fatal(err)
				}
			})
			require.Zero(t, allocs)
		})
	}
}

type nopSink struct{}

func (nopSink) SentPacket([]byte) {}

// TestSinkSeesWholePacket checks the bytes a sink gets parse as the packet
// on the wire, message by message.
func TestSinkSeesWholePacket(t *testing.T) {
	netlab.Require(t)
	sink := &recordingSink{}
	p, err := publisher.New(publisher.Config{Group: netip.MustParseAddrPort("239.10.0.22:31220"), Sinks: []publisher.Sink{sink}, Session: "S", Grace: -1})
	require.NoError(t, err)
	_, err = p.PublishBatch([][]byte{[]byte("one"), []byte("two"), {}})
	require.NoError(t, err)
	require.NoError(t, p.Close())
	got := sink.packets()
	require.Len(t, got, 1)
	pk, err := wire.ParsePacket(got[0])
	require.NoError(t, err)
	require.Equal(t, wire.Seq(1), pk.Seq)
	var msgs [][]byte
	for it := pk.Messages(); ; {
		m, _, ok := it.Next()
		if !ok {
			break
		}
		msgs = append(msgs, m)
	}
	require.Equal(t, [][]byte{[]byte("one"), []byte("two"), {}}, msgs)
	require.True(t, bytes.HasPrefix(got[0], []byte("S         ")))
}
