package pcap

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mdbus/mdbus/journal"

	"github.com/mdbus/mdbus/wire"
)

// seedCaptures are whole capture files for FuzzImport: the real NASDAQ
// capture and synthetic ones of every link type, pcapng with several
// interfaces, fragments and skipped frames.
func seedCaptures(t testing.TB) [][]byte {
	pkt := moldPacket(t, "SEED", 1, "a", "bc")
	big := moldPacket(t, "SEED", 3, string(make([]byte, 3000)))
	v4, v6 := ipUDP(t, src4, dst4, pkt), ipUDP(t, src6, dst6, pkt)
	ts := time.Unix(1700000000, 0)
	var seeds [][]byte
	if b, err := os.ReadFile(sharedCapture); err == nil {
		seeds = append(seeds, b)
	}
	var frames []frame
	frames = append(frames, frame{ts: ts, data: ethernet(v4, etherTypeQinQ, etherTypeVLAN)}, frame{ts: ts, data: ethernet(v6)})
	for _, f := range frag4(ipUDP(t, src4, dst4, big), 1480) {
		frames = append(frames, frame{ts: ts, data: ethernet(f)})
	}
	for _, f := range frag6(ipUDP(t, src6, dst6, big), 1448, 3) {
		frames = append(frames, frame{ts: ts, data: ethernet(f)})
	}
	full := ethernet(v4)
	frames = append(frames, frame{ts: ts, data: full[:30], origLen: len(full)})
	seeds = append(seeds,
		writePcap(t, LinkEthernet, true, frames...),
		writePcap(t, LinkEthernet, false, frame{ts: ts, data: ethernet(v4)}),
		writePcap(t, LinkSLL, true, frame{ts: ts, data: sll(v4)}),
		writePcap(t, LinkSLL2, true, frame{ts: ts, data: sll2(v6)}),
		writePcap(t, LinkRaw, true, frame{ts: ts, data: v4}, frame{ts: ts, data: v6}),
	)
	ng := ngSHB()
	ng = ngBlock(ng, 1, ngIDB(LinkEthernet, 0))
	ng = ngBlock(ng, 1, ngIDB(LinkSLL2, 9))
	ng = ngBlock(ng, 6, ngEPB(0, 1, ethernet(v4), len(ethernet(v4))))
	ng = ngBlock(ng, 6, ngEPB(1, 2, sll2(v6), len(sll2(v6))))
	seeds = append(seeds, ng)
	return seeds
}

// FuzzImport reads whole capture files: never a panic, every frame
// counted once, every event a valid MoldUDP64 packet that passed the
// filter, memory bounded by the input.
func FuzzImport(f *testing.F) {
	for _, s := range seedCaptures(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg := Config{Ports: []uint16{dst4.Port(), 26477}, Reassembly: Reassembly{MaxDatagrams: 4, MaxBytes: 1 << 16}}
		r, err := NewReader(bytes.NewReader(data), cfg)
		if err != nil {
			return
		}
		for range 100000 {
			ev, err := r.Next()
			if err != nil {
				if !errors.Is(err, io.EOF) {
					require.Contains(t, err.Error(), "capture: packet")
				}
				break
			}
			_, perr := wire.ParsePacket(ev.Packet)
			require.NoError(t, perr)
			require.Contains(t, cfg.Ports, ev.Dst.Port())
		}
		st := r.Stats()
		require.Equal(t, st.Frames, st.Events+st.SkippedTotal())
		require.LessOrEqual(t, r.dec.frag.bytes, 1<<16)
	})
}

// FuzzDecode decodes single frames of every link type: never a panic, and
// a decoded datagram rebuilt as an Ethernet frame decodes to the same.
func FuzzDecode(f *testing.F) {
	pkt := moldPacket(f, "SEED", 1, "a", "bc")
	v4, v6 := ipUDP(f, src4, dst4, pkt), ipUDP(f, src6, dst6, pkt)
	for _, s := range []struct {
		lt LinkType
		b  []byte
	}{
		{LinkEthernet, ethernet(v4, etherTypeVLAN)}, {LinkEthernet, ethernet(v6, etherTypeQinQ, etherTypeVLAN)},
		{LinkSLL, sll(v4)}, {LinkSLL2, sll2(v6)}, {LinkRaw, v4}, {LinkIPv6, v6},
		{LinkRaw, frag4(ipUDP(f, src4, dst4, moldPacket(f, "F", 1, string(make([]byte, 2000)))), 1480)[0]},
		{LinkRaw, frag6(ipUDP(f, src6, dst6, moldPacket(f, "F", 1, string(make([]byte, 2000)))), 1448, 5)[1]},
	} {
		f.Add(uint16(s.lt), s.b, uint16(0))
	}
	f.Fuzz(func(t *testing.T, lt uint16, frame []byte, extra uint16) {
		d := NewDecoder(Reassembly{MaxDatagrams: 2, MaxBytes: 1 << 16})
		// Feed the frame twice (a duplicate fragment must not break
		// reassembly) and then cut.
		for _, fr := range [][]byte{frame, frame, frame[:len(frame)/2]} {
			dg, r, ok := d.Decode(LinkType(lt), fr, len(fr)+int(extra%2), 0)
			if !ok {
				require.Less(t, r, NumReasons)
				continue
			}
			if len(dg.Payload) > 65000 || dg.Src.Addr().Unmap().Is4() != dg.Dst.Addr().Unmap().Is4() {
				continue // AppendFrame writes IPv4-mapped addresses as IPv4
			}
			again, err := AppendFrame(nil, dg.Src, dg.Dst, 1, dg.Payload)
			require.NoError(t, err)
			dg2, r2, ok2 := NewDecoder(Reassembly{}).Decode(LinkEthernet, again, len(again), 0)
			require.True(t, ok2, "reason %v", r2)
			require.Equal(t, unmap(dg.Src), dg2.Src)
			require.Equal(t, unmap(dg.Dst), dg2.Dst)
			require.Equal(t, dg.Payload, dg2.Payload)
		}
		require.LessOrEqual(t, d.frag.bytes, 1<<16)
	})
}

func unmap(a netip.AddrPort) netip.AddrPort { return netip.AddrPortFrom(a.Addr().Unmap(), a.Port()) }

// TestImportJournalRandom drives the Importer with seeded random packet
// sequences (four streams, data, heartbeats, ends, restarts, gaps,
// reordering, duplicates): never a panic or an error, every journaled
// message is the one captured for its sequence, and Appended counts what
// the journal holds. (A property test rather than a Fuzz target: each run
// creates journal files and fsyncs, some 50 runs a second, far too slow for
// CI's 200000 executions per target.)
func TestImportJournalRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 2026))
	for run := range 60 {
		ops := make([]byte, 3*(1+rng.IntN(40)))
		for i := range ops {
			ops[i] = byte(rng.IntN(256))
		}
		if i := rng.IntN(len(ops)/3) * 3; rng.IntN(2) == 0 {
			ops[i+1] = 0 // more restarts at sequence 1
		}
		t.Run(fmt.Sprint(run), func(t *testing.T) { importOps(t, ops) })
	}
}

func importOps(t *testing.T, ops []byte) {
	srcs := []netip.AddrPort{src4, src4withPort(40001)}
	sessions := []string{"FZA", "FZB"}
	j, err := journal.Open(t.TempDir(), journal.Config{Sync: journal.SyncNone})
	require.NoError(t, err)
	defer j.Close()
	im := NewImporter(j, ImportConfig{Reorder: 3})
	for i := 0; i+3 <= len(ops); i += 3 {
		src, sess := srcs[ops[i]&1], sessions[ops[i]>>1&1]
		seq := wire.Seq(ops[i+1]%40) + 1
		var pkt []byte
		switch n := int(ops[i+2] % 7); n {
		case 0:
			pkt = wire.AppendHeartbeat(nil, session(t, sess), seq)
		case 6:
			pkt = wire.AppendEndOfSession(nil, session(t, sess), seq)
		default:
			var msgs []string
			for k := range n {
				msgs = append(msgs, fmt.Sprintf("%s/%d", sess, int(seq)+k))
			}
			pkt = moldPacket(t, sess, seq, msgs...)
		}
		require.NoError(t, im.Add(Event{Time: int64(i), Src: src, Dst: dst4, Packet: pkt, Frame: uint64(i/3 + 1)}), "ops %x", ops)
	}
	require.NoError(t, im.Close(), "ops %x", ops)
	var total uint64
	for _, in := range j.Streams() {
		for _, r := range records(t, j, in.ID) {
			require.Equal(t, fmt.Sprintf("%s/%d", in.ID.Session.String(), r.Seq), r.Data, "ops %x", ops)
			total++
		}
	}
	require.Equal(t, total, im.Stats().Appended, "ops %x", ops)
}
