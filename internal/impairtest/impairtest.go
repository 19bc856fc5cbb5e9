// Package impairtest holds the helpers that the tests of the impairment
// layer (packetconn/impair) and of the impairment relay (tools/impair)
// share: data packets that carry their sequences, a multicast sender and
// receiver on the lab's lo, and checks on what arrived. Only tests import
// it.
package impairtest

import (
	"encoding/binary"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/mdbus/mdbus/internal/sock"
	"github.com/mdbus/mdbus/wire"
	"github.com/stretchr/testify/require"
)

// DataPacket encodes a data packet of session s with count 8-byte
// messages starting at seq, each message holding its sequence.
func DataPacket(s wire.Session, seq wire.Seq, count int) []byte {
	var enc wire.Encoder
	enc.Reset(make([]byte, 0, wire.PacketLen(count, 8*count)), s, seq, wire.DefaultPayloadSizeIPv4)
	var msg [8]byte
	for i := range count {
		binary.BigEndian.PutUint64(msg[:], uint64(seq)+uint64(i))
		if err := enc.Add(msg[:]); err != nil {
			panic(err)
		}
	}
	return enc.Bytes()
}

// Packets returns n single-message data packets of s with sequences 1..n.
func Packets(s wire.Session, n int) [][]byte {
	ps := make([][]byte, n)
	for i := range ps {
		ps[i] = DataPacket(s, wire.Seq(i+1), 1)
	}
	return ps
}

// SeqOf returns the sequence of a packet's header.
func SeqOf(t testing.TB, d []byte) wire.Seq {
	t.Helper()
	h, err := wire.ParseHeader(d)
	require.NoError(t, err)
	return h.Seq
}

// Missing returns the sequences 1..n absent from got.
func Missing(got []wire.Seq, n int) []wire.Seq {
	seen := make([]bool, n+1)
	for _, s := range got {
		if s >= 1 && int(s) <= n {
			seen[s] = true
		}
	}
	var m []wire.Seq
	for s := 1; s <= n; s++ {
		if !seen[s] {
			m = append(m, wire.Seq(s))
		}
	}
	return m
}

// Near requires got/n within tol of p.
func Near(t testing.TB, p float64, got uint64, n int, tol float64, what string) {
	t.Helper()
	r := float64(got) / float64(n)
	require.InDelta(t, p, r, tol, "%s rate %.4f, configured %.4f", what, r, p)
}

// LabRx opens a receiver of group on lo (inside the lab), closed when the
// test ends.
func LabRx(t testing.TB, group netip.AddrPort) *sock.Conn {
	t.Helper()
	lo, err := net.InterfaceByName("lo")
	require.NoError(t, err)
	rx, err := sock.Open(sock.Config{Local: netip.AddrPortFrom(netip.IPv4Unspecified(), group.Port()),
		ReusePort: true, ReadBuffer: 4 << 20})
	require.NoError(t, err)
	t.Cleanup(func() { rx.Close() })
	require.NoError(t, rx.Join(lo, group.Addr(), netip.Addr{}))
	return rx
}

// LabTx opens a multicast sender on lo, TTL 0, loopback on, closed when
// the test ends.
func LabTx(t testing.TB) *sock.Conn {
	t.Helper()
	lo, err := net.InterfaceByName("lo")
	require.NoError(t, err)
	tx, err := sock.Open(sock.Config{Local: netip.AddrPortFrom(netip.IPv4Unspecified(), 0), Interface: lo, Loopback: true})
	require.NoError(t, err)
	t.Cleanup(func() { tx.Close() })
	return tx
}

// Send writes ps to group through pc, in one WriteBatch.
func Send(t testing.TB, pc sock.PacketConn, group netip.AddrPort, ps [][]byte) {
	t.Helper()
	b := sock.NewBatch(len(ps), 0)
	for i, p := range ps {
		b.Msgs[i].Buf, b.Msgs[i].Addr = p, group
	}
	n, err := pc.WriteBatch(b, len(ps))
	require.NoError(t, err)
	require.Equal(t, len(ps), n)
}

// Drain reads from pc until a read times out after quiet, appending the
// sequences to got and calling check, when set, on every datagram. A
// kernel drop fails the test: the sets could not be compared.
func Drain(t testing.TB, pc sock.PacketConn, b *sock.Batch, got []wire.Seq, quiet time.Duration, check func(*sock.Message)) []wire.Seq {
	t.Helper()
	for range 1 << 20 {
		require.NoError(t, pc.SetReadDeadline(time.Now().Add(quiet)))
		n, err := pc.ReadBatch(b)
		if sock.IsTimeout(err) {
			return got
		}
		require.NoError(t, err)
		require.Zero(t, b.Drops, "the kernel dropped datagrams: the test cannot compare sets")
		for i := range b.Msgs[:n] {
			if check != nil {
				check(&b.Msgs[i])
			}
			got = append(got, SeqOf(t, b.Msgs[i].Buf))
		}
	}
	t.Fatal("drain did not end")
	return nil
}
