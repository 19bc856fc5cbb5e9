package pcap

import (
	"bytes"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mdbus/mdbus/journal"
	"github.com/mdbus/mdbus/wire"
)

func openJournal(t testing.TB) *journal.Journal {
	t.Helper()
	j, err := journal.Open(t.TempDir(), journal.Config{Sync: journal.SyncNone})
	require.NoError(t, err)
	t.Cleanup(func() { _ = j.Close() })
	return j
}

// importBytes imports captures (in order) into j with one Importer.
func importBytes(t testing.TB, j *journal.Journal, cfg ImportConfig, captures ...[]byte) (ImportStats, error) {
	t.Helper()
	im := NewImporter(j, cfg)
	var err error
	for i, c := range captures {
		if _, err = im.ImportFile(bytes.NewReader(c), Config{Name: fmt.Sprintf("c%d.pcap", i)}); err != nil {
			break
		}
	}
	if cerr := im.Close(); err == nil {
		err = cerr
	}
	return im.Stats(), err
}

type rec struct {
	Seq  wire.Seq
	Time int64
	Data string
}

// records reads every record of stream id.
func records(t testing.TB, j *journal.Journal, id journal.StreamID) []rec {
	t.Helper()
	r, err := j.OpenReader(id)
	require.NoError(t, err)
	defer r.Close()
	var out []rec
	for {
		x, err := r.Next()
		if err == io.EOF {
			return out
		}
		require.NoError(t, err)
		out = append(out, rec{x.Seq, x.Time, string(x.Data)})
	}
}

// journalView is every stream of j: id, ended, records.
type streamView struct {
	Session wire.Session
	Source  netip.AddrPort
	Inc     uint32
	Ended   bool
	Recs    []rec
}

func journalView(t testing.TB, j *journal.Journal) []streamView {
	var out []streamView
	for _, in := range j.Streams() {
		out = append(out, streamView{in.ID.Session, in.ID.Source, in.ID.Incarnation, in.Ended, records(t, j, in.ID)})
	}
	return out
}

// feed builds a capture of data packets of session s from src to dst4,
// one packet per (seq, count) pair, messages "s/seq", 1 ms apart.
func feed(t testing.TB, src netip.AddrPort, s string, start time.Time, pkts ...[2]int) []frame {
	var out []frame
	for i, p := range pkts {
		var msgs []string
		for k := range p[1] {
			msgs = append(msgs, fmt.Sprintf("%s/%d", s, p[0]+k))
		}
		pkt := moldPacket(t, s, wire.Seq(p[0]), msgs...)
		out = append(out, frame{ts: start.Add(time.Duration(i) * time.Millisecond), data: ethernet(ipUDP(t, src, dst4, pkt))})
	}
	return out
}

func TestImportSharedCaptureRoundTrip(t *testing.T) {
	orig, err := os.ReadFile(sharedCapture)
	require.NoError(t, err)
	origEvents, _ := readAll(t, orig, Config{})

	// The capture holds two packets of one session with a gap between
	// them (14764496, then 19009117..19009154): two incarnations.
	j := openJournal(t)
	st, err := importBytes(t, j, ImportConfig{}, orig)
	require.NoError(t, err)
	require.EqualValues(t, 39, st.Appended)
	require.EqualValues(t, 1, st.GapCount)
	require.Equal(t, wire.Seq(14764497), st.Gaps[0].From)
	require.Equal(t, wire.Seq(19009117), st.Gaps[0].To)
	view := journalView(t, j)
	require.Len(t, view, 2)
	require.Len(t, view[0].Recs, 1)
	require.Len(t, view[1].Recs, 38)
	require.Equal(t, wire.Seq(19009117), view[1].Recs[0].Seq)
	require.Equal(t, int64(1692711038952561782), view[1].Recs[37].Time)

	// The messages are those tshark shows (golden file).
	var sb bytes.Buffer
	for _, v := range view {
		fmt.Fprintf(&sb, "%s %d %d\n", v.Session.String(), v.Recs[0].Seq, len(v.Recs))
		for _, r := range v.Recs {
			fmt.Fprintf(&sb, "  %d %x\n", r.Seq, r.Data)
		}
	}
	golden, err := os.ReadFile(filepath.Join("testdata", "nasdaq-itch50-multiple-packets.golden"))
	require.NoError(t, err)
	require.Equal(t, string(golden), sb.String())

	// Export every incarnation to the capture's group, in time order.
	out := exportAll(t, j, ExportConfig{Group: netip.MustParseAddrPort("233.54.12.111:26477")})
	exported, xst := readAll(t, out, Config{})
	require.EqualValues(t, 2, xst.Events)
	// Byte-identical MoldUDP64 packets, sources, groups and times.
	require.Equal(t, origEvents, exported)

	// And into a second journal: the same records.
	j2 := openJournal(t)
	_, err = importBytes(t, j2, ImportConfig{}, out)
	require.NoError(t, err)
	require.Equal(t, view, journalView(t, j2))

	t.Run("tshark reads the export", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "x.pcap")
		require.NoError(t, os.WriteFile(file, out, 0o644))
		require.Equal(t, string(golden), tsharkDecode(t, file, 26477))
	})
}

// exportAll exports every stream of j, oldest first, into one pcap.
func exportAll(t testing.TB, j *journal.Journal, cfg ExportConfig) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf)
	require.NoError(t, err)
	for _, in := range j.Streams() {
		_, err := Export(w, j, in.ID, cfg)
		require.NoError(t, err)
	}
	return buf.Bytes()
}

func TestImportIdempotent(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	c := writePcap(t, LinkEthernet, true, feed(t, src4, "IDEM", t0, [2]int{1, 3}, [2]int{4, 2}, [2]int{6, 5})...)
	j := openJournal(t)
	st, err := importBytes(t, j, ImportConfig{}, c)
	require.NoError(t, err)
	require.EqualValues(t, 10, st.Appended)
	require.Len(t, st.Streams, 1)
	require.True(t, st.Streams[0].Created)
	before := journalView(t, j)

	st, err = importBytes(t, j, ImportConfig{}, c)
	require.NoError(t, err)
	require.Zero(t, st.Appended)
	require.EqualValues(t, 10, st.Held)
	require.False(t, st.Streams[0].Created)
	require.Equal(t, before, journalView(t, j))

	// A longer capture of the same stream: only the new tail is added.
	longer := writePcap(t, LinkEthernet, true, feed(t, src4, "IDEM", t0, [2]int{1, 3}, [2]int{4, 2}, [2]int{6, 5}, [2]int{11, 4})...)
	st, err = importBytes(t, j, ImportConfig{}, longer)
	require.NoError(t, err)
	require.EqualValues(t, 4, st.Appended)
	require.EqualValues(t, 10, st.Held)
	view := journalView(t, j)
	require.Len(t, view, 1)
	require.Len(t, view[0].Recs, 14)
}

func TestImportContinuesAcrossFiles(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	a := writePcap(t, LinkEthernet, true, feed(t, src4, "SPLIT", t0, [2]int{1, 5})...)
	b := writePcap(t, LinkEthernet, true, feed(t, src4, "SPLIT", t0.Add(time.Second), [2]int{6, 5})...)
	j := openJournal(t)
	_, err := importBytes(t, j, ImportConfig{}, a)
	require.NoError(t, err)
	st, err := importBytes(t, j, ImportConfig{}, b) // a separate run
	require.NoError(t, err)
	require.EqualValues(t, 5, st.Appended)
	view := journalView(t, j)
	require.Len(t, view, 1, "the second file continues the first's incarnation")
	require.Len(t, view[0].Recs, 10)
}

func TestImportRestartEndDuplicates(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	frames := feed(t, src4, "RST", t0, [2]int{1, 3}, [2]int{4, 3}, [2]int{4, 3}, [2]int{1, 2}, [2]int{3, 1})
	// A second source sending the same session is another stream.
	frames = append(frames, frame{ts: t0, data: ethernet(ipUDP(t, src4withPort(41000), dst4, moldPacket(t, "RST", 1, "other/1", "other/2")))})
	// End of session of the second incarnation, then a heartbeat of an
	// unknown stream.
	frames = append(frames,
		frame{ts: t0.Add(time.Second), data: ethernet(ipUDP(t, src4, dst4, wire.AppendEndOfSession(nil, session(t, "RST"), 4)))},
		frame{ts: t0.Add(time.Second), data: ethernet(ipUDP(t, src4, dst4, wire.AppendHeartbeat(nil, session(t, "NOBODY"), 9)))},
	)
	j := openJournal(t)
	st, err := importBytes(t, j, ImportConfig{}, writePcap(t, LinkEthernet, true, frames...))
	require.NoError(t, err)
	require.EqualValues(t, 3, st.Duplicates, "the repeated packet 4..6")
	require.EqualValues(t, 1, st.Orphans)
	require.EqualValues(t, 1, st.Ends)
	view := journalView(t, j)
	require.Len(t, view, 3)
	require.Equal(t, uint32(1), view[0].Inc)
	require.Len(t, view[0].Recs, 6)
	require.False(t, view[0].Ended)
	require.Equal(t, uint32(2), view[1].Inc, "the restart at sequence 1")
	require.Len(t, view[1].Recs, 3)
	require.True(t, view[1].Ended)
	require.Equal(t, "RST/3", view[1].Recs[2].Data)
	require.Equal(t, src4withPort(41000), view[2].Source)

	// Imported again: nothing new, the restart matched to incarnation 2.
	st, err = importBytes(t, j, ImportConfig{}, writePcap(t, LinkEthernet, true, frames...))
	require.NoError(t, err)
	require.Zero(t, st.Appended)
	require.EqualValues(t, 11, st.Held)
	require.Equal(t, view, journalView(t, j))

	// Export of the ended incarnation carries the end of session.
	var buf bytes.Buffer
	w, err := NewWriter(&buf)
	require.NoError(t, err)
	xs, err := Export(w, j, journal.StreamID{Session: session(t, "RST"), Source: src4, Incarnation: 2}, ExportConfig{Group: dst4})
	require.NoError(t, err)
	require.True(t, xs.End)
	evs, _ := readAll(t, buf.Bytes(), Config{})
	require.Len(t, evs, 3) // packets 1..2, 3, end of session
	p, err := wire.ParsePacket(evs[2].Packet)
	require.NoError(t, err)
	require.True(t, p.IsEndOfSession())
	require.Equal(t, wire.Seq(4), p.Seq)
}

func TestImportGaps(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	frames := feed(t, src4, "GAP", t0, [2]int{1, 5}, [2]int{11, 5})
	frames = append(frames, frame{ts: t0.Add(time.Second), data: ethernet(ipUDP(t, src4, dst4, wire.AppendHeartbeat(nil, session(t, "GAP"), 20)))})
	frames = append(frames, feed(t, src4, "GAP", t0.Add(2*time.Second), [2]int{20, 2}, [2]int{8, 1})...)
	c := writePcap(t, LinkEthernet, true, frames...)

	t.Run("split", func(t *testing.T) {
		j := openJournal(t)
		st, err := importBytes(t, j, ImportConfig{}, c)
		require.NoError(t, err)
		require.EqualValues(t, 2, st.GapCount)
		require.Equal(t, []Gap{
			{Session: session(t, "GAP"), Source: src4, From: 6, To: 11, File: "c0.pcap", Frame: 2},
			{Session: session(t, "GAP"), Source: src4, From: 16, To: 20, File: "c0.pcap", Frame: 3},
		}, st.Gaps)
		require.EqualValues(t, 1, st.Late, "message 8 came after the stream moved on")
		view := journalView(t, j)
		require.Len(t, view, 3)
		require.Len(t, view[0].Recs, 5)
		require.Len(t, view[1].Recs, 5)
		require.Equal(t, wire.Seq(11), view[1].Recs[0].Seq)
		require.Len(t, view[2].Recs, 2)

		// Importing it again adds nothing and reports the same gaps.
		st, err = importBytes(t, j, ImportConfig{}, c)
		require.NoError(t, err)
		require.Zero(t, st.Appended)
		require.EqualValues(t, 12, st.Held)
		require.Len(t, journalView(t, j), 3)
	})
	t.Run("fail", func(t *testing.T) {
		j := openJournal(t)
		st, err := importBytes(t, j, ImportConfig{Gaps: GapFail}, c)
		require.ErrorIs(t, err, ErrGap)
		require.ErrorContains(t, err, "seen at c0.pcap packet 2")
		require.ErrorContains(t, err, "messages 6..10 missing")
		require.EqualValues(t, 5, st.Appended, "what came before the gap stays")
	})
}

func TestImportMaxOpen(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	var frames []frame
	for round := range 3 {
		for s := range 5 {
			frames = append(frames, feed(t, src4, fmt.Sprintf("S%d", s), t0.Add(time.Duration(round)*time.Second), [2]int{1 + round*2, 2})...)
		}
	}
	j := openJournal(t)
	st, err := importBytes(t, j, ImportConfig{MaxOpen: 2}, writePcap(t, LinkEthernet, true, frames...))
	require.NoError(t, err)
	require.EqualValues(t, 30, st.Appended)
	view := journalView(t, j)
	require.Len(t, view, 5)
	for _, v := range view {
		require.Len(t, v.Recs, 6)
	}
}

// TestExportTshark is acceptance 8: a journal exported to pcap decodes in
// tshark with the right session, sequence and count for every packet,
// over IPv4 and IPv6, and the export packs up to the payload size.
func TestExportTshark(t *testing.T) {
	for _, group := range []netip.AddrPort{dst4, dst6} {
		t.Run(group.String(), func(t *testing.T) {
			j := openJournal(t)
			w, err := j.Create(session(t, "ACCEPT8"), src4, 1)
			require.NoError(t, err)
			t0 := time.Unix(1700000000, 0).UnixNano()
			// 500 messages of 1..200 bytes; every 7 share a timestamp.
			for i := range 500 {
				msg := bytes.Repeat([]byte{byte(i)}, 1+i%200)
				require.NoError(t, w.Append(wire.Seq(i+1), t0+int64(i/7)*1000, msg))
			}
			require.NoError(t, w.End(501))
			require.NoError(t, w.Close())

			for _, co := range []time.Duration{0, -1} {
				var buf bytes.Buffer
				pw, err := NewWriter(&buf)
				require.NoError(t, err)
				xs, err := Export(pw, j, w.ID(), ExportConfig{Group: group, Coalesce: co})
				require.NoError(t, err)
				require.EqualValues(t, 500, xs.Messages)
				require.True(t, xs.End)

				evs, _ := readAll(t, buf.Bytes(), Config{})
				require.EqualValues(t, xs.Packets, len(evs))
				want := eventView(t, evs)
				limit := wire.DefaultPayloadSizeIPv4
				if !group.Addr().Is4() {
					limit = wire.DefaultPayloadSizeIPv6
					require.Equal(t, netip.AddrPortFrom(netip.IPv6Loopback(), 31000), evs[0].Src)
				} else {
					require.Equal(t, src4, evs[0].Src)
				}
				next := wire.Seq(1)
				for _, ev := range evs {
					require.LessOrEqual(t, len(ev.Packet), limit)
					p, err := wire.ParsePacket(ev.Packet)
					require.NoError(t, err)
					require.Equal(t, next, p.Seq)
					next = p.Next()
				}
				require.Equal(t, wire.Seq(501), next)
				if co < 0 {
					require.Less(t, len(evs), 100, "packed to the payload size")
				} else {
					require.Greater(t, len(evs), 500/7, "one packet per timestamp at least")
				}
				file := filepath.Join(t.TempDir(), "x.pcap")
				require.NoError(t, os.WriteFile(file, buf.Bytes(), 0o644))
				require.Equal(t, want, tsharkDecode(t, file, group.Port()))
			}
		})
	}
}

func TestExportRanges(t *testing.T) {
	j := openJournal(t)
	w, err := j.Create(session(t, "RANGE"), src4, 1)
	require.NoError(t, err)
	for i := range 100 {
		require.NoError(t, w.Append(wire.Seq(i+1), int64(1000*(i+1)), []byte{byte(i)}))
	}
	require.NoError(t, w.End(101))
	require.NoError(t, w.Close())
	for _, tc := range []struct {
		name        string
		cfg         ExportConfig
		first, last wire.Seq
		end         bool
	}{
		{"all", ExportConfig{}, 1, 100, true},
		{"seq", ExportConfig{From: 10, To: 20}, 10, 20, false},
		{"seq to end", ExportConfig{From: 90}, 90, 100, true},
		{"time", ExportConfig{FromTime: 5000, ToTime: 8000}, 5, 7, false},
		{"time and seq", ExportConfig{From: 6, FromTime: 5000, ToTime: 8000}, 6, 7, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			pw, err := NewWriter(&buf)
			require.NoError(t, err)
			xs, err := Export(pw, j, w.ID(), tc.cfg)
			require.NoError(t, err)
			require.Equal(t, tc.first, xs.First)
			require.Equal(t, tc.last, xs.Last)
			require.EqualValues(t, tc.last-tc.first+1, xs.Messages)
			require.Equal(t, tc.end, xs.End)
			evs, _ := readAll(t, buf.Bytes(), Config{})
			require.Equal(t, int64(1000*tc.first), evs[0].Time)
		})
	}
}

func TestExportAllocs(t *testing.T) {
	j := openJournal(t)
	w, err := j.Create(session(t, "ALLOC"), src4, 1)
	require.NoError(t, err)
	const n = 20000
	for i := range n {
		require.NoError(t, w.Append(wire.Seq(i+1), int64(i/10), []byte("an ITCH-sized message of about forty bytes")))
	}
	require.NoError(t, w.Close())
	pw, err := NewWriter(io.Discard)
	require.NoError(t, err)
	var xs ExportStats
	allocs := testing.AllocsPerRun(3, func() {
		xs, err = Export(pw, j, w.ID(), ExportConfig{})
	})
	require.NoError(t, err)
	require.EqualValues(t, n, xs.Messages)
	// A fixed cost per export (reader, buffers), none per record.
	require.Less(t, allocs, float64(n)/100, "allocations per export")
}

func session(t testing.TB, s string) wire.Session {
	sess, err := wire.ParseSession(s)
	require.NoError(t, err)
	return sess
}

func src4withPort(p uint16) netip.AddrPort { return netip.AddrPortFrom(src4.Addr(), p) }

// TestRoundTripSynthetic: a capture of several streams (IPv4 and IPv6,
// VLAN-tagged, a restart, an end of session, heartbeats, noise) goes
// capture -> journal -> pcap -> journal with every message, session,
// sequence and timestamp intact, and each stream's packets come out of the
// export exactly as captured (only an end of session's time is not kept).
func TestRoundTripSynthetic(t *testing.T) {
	t0 := time.Unix(1700000000, 123456789)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	pkt := func(src, dst netip.AddrPort, s string, seq int, msgs ...string) []byte {
		return ethernet(ipUDP(t, src, dst, moldPacket(t, s, wire.Seq(seq), msgs...)), etherTypeVLAN)
	}
	raw := func(src, dst netip.AddrPort, b []byte) []byte { return ethernet(ipUDP(t, src, dst, b)) }
	frames := []frame{
		{ts: at(0), data: pkt(src4, dst4, "A", 1, "a1", "a2")},
		{ts: at(1), data: pkt(src6, dst6, "B6", 1, "b1")},
		{ts: at(2), data: raw(src4, dst4, wire.AppendHeartbeat(nil, session(t, "A"), 3))},
		{ts: at(3), data: pkt(src4, dst4, "A", 3, "a3", "a4", "a5")},
		{ts: at(4), data: pkt(src6, dst6, "B6", 2, "b2", "b3")},
		{ts: at(5), data: raw(src4, dst4, []byte("noise"))},
		{ts: at(6), data: raw(src4, dst4, wire.AppendEndOfSession(nil, session(t, "A"), 6))},
		{ts: at(7), data: pkt(src4, dst4, "A", 1, "new a1")}, // restarted
		{ts: at(8), data: pkt(src6, dst6, "B6", 4, "b4")},
	}
	capture := writePcap(t, LinkEthernet, true, frames...)
	orig, _ := readAll(t, capture, Config{})

	j := openJournal(t)
	st, err := importBytes(t, j, ImportConfig{}, capture)
	require.NoError(t, err)
	require.EqualValues(t, 10, st.Appended)
	require.Zero(t, st.GapCount)
	view := journalView(t, j)
	require.Len(t, view, 3) // A#1 (ended), B6#1, A#2

	// Export per stream to its own group (as captured), then compare the
	// data and end-of-session packets of each stream with the capture's.
	var buf bytes.Buffer
	w, err := NewWriter(&buf)
	require.NoError(t, err)
	for _, in := range j.Streams() {
		g := dst4
		if !in.ID.Source.Addr().Is4() {
			g = dst6
		}
		_, err := Export(w, j, in.ID, ExportConfig{Group: g})
		require.NoError(t, err)
	}
	exported, _ := readAll(t, buf.Bytes(), Config{})
	byStream := func(evs []Event) map[string][]Event {
		m := map[string][]Event{}
		for _, ev := range evs {
			p, err := wire.ParsePacket(ev.Packet)
			require.NoError(t, err)
			if p.IsHeartbeat() {
				continue // heartbeats are not journaled
			}
			if p.IsEndOfSession() {
				// The journal records the end, not its time: the export
				// stamps it with the last message's.
				ev.Time = 0
			}
			ev.Frame = 0
			k := ev.Src.String() + "/" + p.Session.String()
			m[k] = append(m[k], ev)
		}
		return m
	}
	require.Equal(t, byStream(orig), byStream(exported))

	j2 := openJournal(t)
	_, err = importBytes(t, j2, ImportConfig{}, buf.Bytes())
	require.NoError(t, err)
	view2 := journalView(t, j2)
	require.ElementsMatch(t, view, view2)
}

// BenchmarkExport exports 100000 40-byte records (10 per timestamp).
func BenchmarkExport(b *testing.B) {
	j := openJournal(b)
	w, err := j.Create(session(b, "BENCH"), src4, 1)
	require.NoError(b, err)
	const n = 100000
	msg := []byte("an ITCH-sized message of about forty b.")
	for i := range n {
		require.NoError(b, w.Append(wire.Seq(i+1), int64(i/10), msg))
	}
	require.NoError(b, w.Close())
	pw, err := NewWriter(io.Discard)
	require.NoError(b, err)
	b.ReportAllocs()
	b.SetBytes(int64(n * len(msg)))
	for b.Loop() {
		if _, err := Export(pw, j, w.ID(), ExportConfig{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "msgs/s")
}

// TestExportStreamsMerged: streams interleaved on the wire come out of
// ExportStreams interleaved the same way, packet for packet.
func TestExportStreamsMerged(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	other := netip.MustParseAddrPort("10.1.2.4:40001")
	var frames []frame
	next := map[string]int{}
	for i := range 20 {
		src, s := src4, "ONE"
		if i%3 == 1 {
			src, s = other, "TWO"
		}
		next[s]++
		frames = append(frames, frame{ts: t0.Add(time.Duration(i) * time.Microsecond),
			data: ethernet(ipUDP(t, src, dst4, moldPacket(t, s, wire.Seq(next[s]), fmt.Sprintf("%s-%d", s, next[s]))))})
	}
	capture := writePcap(t, LinkEthernet, true, frames...)
	orig, _ := readAll(t, capture, Config{})
	j := openJournal(t)
	_, err := importBytes(t, j, ImportConfig{}, capture)
	require.NoError(t, err)
	var ids []journal.StreamID
	for _, in := range j.Streams() {
		ids = append(ids, in.ID)
	}
	require.Len(t, ids, 2)
	var buf bytes.Buffer
	w, err := NewWriter(&buf)
	require.NoError(t, err)
	sts, err := ExportStreams(w, j, ids, ExportConfig{Group: dst4})
	require.NoError(t, err)
	require.EqualValues(t, 20, sts[0].Messages+sts[1].Messages)
	exported, _ := readAll(t, buf.Bytes(), Config{})
	require.Equal(t, orig, exported)
}

// BenchmarkImport journals a capture of 1000 packets of 36 40-byte
// messages (a fresh journal per iteration, no fsync).
func BenchmarkImport(b *testing.B) {
	msgs := make([]string, 36)
	for i := range msgs {
		msgs[i] = fmt.Sprintf("%-40d", i)
	}
	var frames []frame
	for i := range 1000 {
		frames = append(frames, frame{ts: time.Unix(1, int64(i)), data: ethernet(ipUDP(b, src4, dst4, moldPacket(b, "BENCH", wire.Seq(1+36*i), msgs...)))})
	}
	data := writePcap(b, LinkEthernet, true, frames...)
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		b.StopTimer()
		j, err := journal.Open(b.TempDir(), journal.Config{Sync: journal.SyncNone})
		require.NoError(b, err)
		b.StartTimer()
		st, err := importBytes(b, j, ImportConfig{}, data)
		require.NoError(b, err)
		require.EqualValues(b, 36000, st.Appended)
		b.StopTimer()
		require.NoError(b, j.Close())
		b.StartTimer()
	}
	b.ReportMetric(float64(b.N*36000)/b.Elapsed().Seconds(), "msgs/s")
}

func TestImportReorder(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	// Packets 1, 3, 4, 2, 5 (2 arrives late), then 7 with 6 never coming.
	frames := feed(t, src4, "ORD", t0, [2]int{1, 2}, [2]int{5, 2}, [2]int{7, 2}, [2]int{3, 2}, [2]int{9, 1}, [2]int{11, 3})
	c := writePcap(t, LinkEthernet, true, frames...)

	t.Run("window", func(t *testing.T) {
		j := openJournal(t)
		st, err := importBytes(t, j, ImportConfig{}, c)
		require.NoError(t, err)
		require.EqualValues(t, 12, st.Appended)
		require.EqualValues(t, 1, st.GapCount, "only message 10 is missing")
		require.Equal(t, wire.Seq(10), st.Gaps[0].From)
		require.Equal(t, wire.Seq(11), st.Gaps[0].To)
		require.EqualValues(t, 6, st.Gaps[0].Frame, "the packet after the hole")
		view := journalView(t, j)
		require.Len(t, view, 2)
		require.Len(t, view[0].Recs, 9)
		for i, r := range view[0].Recs {
			require.Equal(t, wire.Seq(i+1), r.Seq)
			require.Equal(t, fmt.Sprintf("ORD/%d", i+1), r.Data)
		}
		require.Equal(t, wire.Seq(11), view[1].Recs[0].Seq)
	})
	t.Run("window of one", func(t *testing.T) {
		j := openJournal(t)
		st, err := importBytes(t, j, ImportConfig{Reorder: 1}, c)
		require.NoError(t, err)
		// 5-6 and 7-8 are held: two beyond the window, so 3-4 is a gap
		// and arrives late.
		require.EqualValues(t, 2, st.Late)
		require.EqualValues(t, 2, st.GapCount)
	})
	t.Run("no window", func(t *testing.T) {
		j := openJournal(t)
		st, err := importBytes(t, j, ImportConfig{Reorder: -1}, c)
		require.NoError(t, err)
		require.EqualValues(t, 2, st.Late)
		require.EqualValues(t, 2, st.GapCount)
	})
	t.Run("held bytes bounded", func(t *testing.T) {
		j := openJournal(t)
		st, err := importBytes(t, j, ImportConfig{ReorderBytes: 10}, c)
		require.NoError(t, err)
		require.EqualValues(t, 2, st.Late)
	})
}

// TestImportRepeatedPackets: a packet repeated byte for byte (a SPAN port,
// a second tap), the first of its stream included, is a duplicate, not a
// restart: one incarnation holds every message once.
func TestImportRepeatedPackets(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	frames := feed(t, src4, "DUP", t0, [2]int{1, 3}, [2]int{1, 3}, [2]int{4, 3}, [2]int{1, 3}, [2]int{4, 3}, [2]int{7, 1})
	for range 100 {
		frames = append(frames, frames[0])
	}
	j := openJournal(t)
	st, err := importBytes(t, j, ImportConfig{}, writePcap(t, LinkEthernet, true, frames...))
	require.NoError(t, err)
	require.EqualValues(t, 7, st.Appended)
	require.EqualValues(t, 3+3+3+300, st.Duplicates)
	view := journalView(t, j)
	require.Len(t, view, 1, "copies of the first packet start no incarnation")
	require.Len(t, view[0].Recs, 7)

	// A restart whose first packet differs is still a new incarnation.
	frames = append(frames, feed(t, src4, "DUP", t0.Add(time.Second), [2]int{1, 2})...)
	j = openJournal(t)
	_, err = importBytes(t, j, ImportConfig{}, writePcap(t, LinkEthernet, true, frames...))
	require.NoError(t, err)
	require.Len(t, journalView(t, j), 2)
}

// TestImportMaxStreams: incarnations beyond MaxStreams are refused and
// counted, with their messages; the writers held open stay within MaxOpen.
func TestImportMaxStreams(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	var frames []frame
	for i := range 10 {
		frames = append(frames, feed(t, src4, fmt.Sprintf("S%d", i), t0, [2]int{1, 2}, [2]int{3, 1})...)
	}
	j := openJournal(t)
	im := NewImporter(j, ImportConfig{MaxStreams: 4, MaxOpen: 2})
	_, err := im.ImportFile(bytes.NewReader(writePcap(t, LinkEthernet, true, frames...)), Config{Name: "c.pcap"})
	require.NoError(t, err)
	require.LessOrEqual(t, len(im.open), 2)
	require.NoError(t, im.Close())
	st := im.Stats()
	require.EqualValues(t, 12, st.Appended)
	require.EqualValues(t, 6, st.RefusedStreams)
	require.EqualValues(t, 18, st.Refused)
	require.Len(t, journalView(t, j), 4)
}

// TestFirstTime: the time of a capture's first MoldUDP64 packet.
func TestFirstTime(t *testing.T) {
	t0 := time.Unix(1700000000, 5)
	ts, ok, err := FirstTime(bytes.NewReader(writePcap(t, LinkEthernet, true, feed(t, src4, "FT", t0, [2]int{1, 1}, [2]int{2, 1})...)), Config{})
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, t0.UnixNano(), ts)
	_, ok, err = FirstTime(bytes.NewReader(writePcap(t, LinkEthernet, true)), Config{})
	require.NoError(t, err)
	require.False(t, ok)
}

// TestImportFollowsTheIncarnationRule: the importer applies the rule the
// subscriber applies (wire.StreamPos.Fit): data more than
// wire.RestartDistance back is a restart, not a late duplicate, and a
// heartbeat going back ends the incarnation.
func TestImportFollowsTheIncarnationRule(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	far := int(wire.RestartDistance) + 100
	frames := feed(t, src4, "FAR", t0, [2]int{far, 3}, [2]int{10, 2}, [2]int{12, 1})
	j := openJournal(t)
	st, err := importBytes(t, j, ImportConfig{}, writePcap(t, LinkEthernet, true, frames...))
	require.NoError(t, err)
	require.Zero(t, st.Duplicates)
	view := journalView(t, j)
	require.Len(t, view, 2, "the far jump back starts a new incarnation")
	require.Equal(t, uint32(2), view[1].Inc)
	require.Len(t, view[1].Recs, 3)
	require.Equal(t, "FAR/10", view[1].Recs[0].Data)

	frames = feed(t, src4, "HB", t0, [2]int{1, 5})
	frames = append(frames, frame{ts: t0.Add(time.Second), data: ethernet(ipUDP(t, src4, dst4, wire.AppendHeartbeat(nil, session(t, "HB"), 3)))})
	frames = append(frames, feed(t, src4, "HB", t0.Add(2*time.Second), [2]int{3, 2})...)
	j = openJournal(t)
	st, err = importBytes(t, j, ImportConfig{}, writePcap(t, LinkEthernet, true, frames...))
	require.NoError(t, err)
	require.Zero(t, st.Duplicates, "after the heartbeat went back, 3..4 are the new run's")
	view = journalView(t, j)
	require.Len(t, view, 2)
	require.Len(t, view[1].Recs, 2)
}
