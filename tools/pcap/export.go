package pcap

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net/netip"
	"time"

	"github.com/mdbus/mdbus/internal/cfgcheck"
	"github.com/mdbus/mdbus/journal"
	"github.com/mdbus/mdbus/wire"
)

// DefaultExportGroup is where exported packets are addressed when neither
// ExportConfig.Group nor a source address of the group's family says
// otherwise: mdbus's default group.
var DefaultExportGroup = netip.MustParseAddrPort("239.192.0.1:31001")

// ExportConfig selects and shapes what Export writes. The zero value
// exports the whole stream to DefaultExportGroup; zero and negative values
// follow Config's rule.
type ExportConfig struct {
	// From and To bound the sequences exported, both inclusive; 0 means
	// the stream's first / last.
	From, To wire.Seq
	// FromTime and ToTime bound the record times exported, [FromTime,
	// ToTime), ns since the Unix epoch; 0 means unbounded.
	FromTime, ToTime int64
	// Group is the packets' destination. Default DefaultExportGroup
	// (its family decides IPv4 or IPv6 frames).
	Group netip.AddrPort
	// Source is the packets' source. Default: the stream's recorded
	// source when it is of the group's family, else the loopback address
	// of the group's family with port 31000.
	Source netip.AddrPort
	// PayloadSize bounds each MoldUDP64 packet; default 1472 over IPv4,
	// 1452 over IPv6 (a 1500-byte MTU).
	PayloadSize int
	// Coalesce is how far apart (in record time) messages may be and
	// still share a packet; the packet carries its first message's time.
	// 0 (the default) rebuilds the packets the journal recorded: records
	// marked as sharing the packet of the one before (journal.PacketSame,
	// written by mdbus record, rewind --journal and pub --journal) join
	// it, and records without a mark (journals of format 1,
	// journal.Writer.Append) share a packet only with records of the same
	// timestamp. Nonzero repacks and ignores the marks: positive packs
	// messages up to that far apart; negative: none, no time bound, up to
	// PayloadSize regardless of time.
	Coalesce time.Duration
}

// ExportStats counts what Export wrote.
type ExportStats struct {
	Packets  uint64
	Messages uint64
	First    wire.Seq // first and last sequence written (0 when none)
	Last     wire.Seq
	End      bool // an end-of-session packet was written
}

// Export writes the records of stream id in j selected by cfg to w as
// MoldUDP64 packets, each timestamped with its first record's time. When
// the stream has ended and the selection reaches its end, an end-of-session
// packet follows, stamped with the last record's time. Nothing is
// allocated per record.
func Export(w *Writer, j *journal.Journal, id wire.StreamID, cfg ExportConfig) (ExportStats, error) {
	st, err := ExportStreams(w, j, []wire.StreamID{id}, cfg)
	return st[0], err
}

// ExportStreams exports several streams as Export does, merged into one
// capture in packet time order (ties keep the order of ids), as they were
// on the wire. It returns each stream's counts, in the order of ids.
func ExportStreams(w *Writer, j *journal.Journal, ids []wire.StreamID, cfg ExportConfig) ([]ExportStats, error) {
	stats := make([]ExportStats, len(ids))
	if err := cfgcheck.Negative(ErrConfig, cfgcheck.F("FromTime", cfg.FromTime), cfgcheck.F("ToTime", cfg.ToTime),
		cfgcheck.F("PayloadSize", cfg.PayloadSize)); err != nil {
		return stats, err
	}
	if !cfg.Group.IsValid() {
		cfg.Group = DefaultExportGroup
	}
	cfg.Group = netip.AddrPortFrom(cfg.Group.Addr().Unmap(), cfg.Group.Port())
	v6 := !cfg.Group.Addr().Is4()
	if cfg.PayloadSize == 0 {
		cfg.PayloadSize = wire.DefaultPayloadSizeIPv4
		if v6 {
			cfg.PayloadSize = wire.DefaultPayloadSizeIPv6
		}
	}
	if cfg.PayloadSize < wire.MinPayloadSize || cfg.PayloadSize > wire.MaxPayloadSize {
		return stats, fmt.Errorf("%w: export: PayloadSize %d outside [%d, %d]", ErrConfig, cfg.PayloadSize, wire.MinPayloadSize, wire.MaxPayloadSize)
	}
	ps := make([]*packer, len(ids))
	defer func() {
		for _, p := range ps {
			if p != nil {
				p.r.Close()
			}
		}
	}()
	for i, id := range ids {
		p, err := newPacker(j, id, cfg, &stats[i])
		if err != nil {
			return stats, err
		}
		ps[i] = p
		if err := p.advance(); err != nil {
			return stats, err
		}
	}
	for {
		var best *packer
		for _, p := range ps {
			if p.ok && (best == nil || p.time < best.time) {
				best = p
			}
		}
		if best == nil {
			return stats, nil
		}
		if err := w.WritePacket(best.time, best.src, cfg.Group, best.pkt); err != nil {
			return stats, err
		}
		best.st.Packets++
		if err := best.advance(); err != nil {
			return stats, err
		}
	}
}

// packer turns one stream's records into MoldUDP64 packets, one at a
// time: pkt and time hold the current one while ok.
type packer struct {
	id          wire.StreamID
	j           *journal.Journal
	r           *journal.Reader
	cfg         ExportConfig
	st          *ExportStats
	src         netip.AddrPort
	first, last wire.Seq
	toTime      int64
	enc         wire.Encoder
	buf         []byte
	carry       []byte // a record read but not fitting the last packet
	carrySeq    wire.Seq
	carryTime   int64
	carryMark   journal.PacketMark
	hasCarry    bool
	lastTime    int64
	eof, ended  bool // records done; end of session written
	pkt         []byte
	time        int64
	ok          bool
}

func newPacker(j *journal.Journal, id wire.StreamID, cfg ExportConfig, st *ExportStats) (*packer, error) {
	v6 := !cfg.Group.Addr().Is4()
	src := cfg.Source
	if !src.IsValid() {
		src = id.Source
	}
	src = netip.AddrPortFrom(src.Addr().Unmap(), src.Port())
	if !src.IsValid() || src.Addr().Is4() == v6 {
		lo := netip.MustParseAddr("127.0.0.1")
		if v6 {
			lo = netip.IPv6Loopback()
		}
		src = netip.AddrPortFrom(lo, 31000)
	}
	r, err := j.OpenReader(id)
	if err != nil {
		return nil, fmt.Errorf("pcap: export %s: %w", id, err)
	}
	p := &packer{id: id, j: j, r: r, cfg: cfg, st: st, src: src, buf: make([]byte, 0, cfg.PayloadSize), toTime: cfg.ToTime}
	if p.toTime == 0 {
		p.toTime = math.MaxInt64
	}
	first, next := r.Bounds()
	p.first, p.last = max(first, cfg.From), next-1
	if cfg.To != 0 && cfg.To < p.last {
		p.last = cfg.To
	}
	if p.first < next {
		if err := r.SeekSeq(p.first); err != nil {
			r.Close()
			return nil, fmt.Errorf("pcap: export %s: seek %d: %w", id, p.first, err)
		}
	}
	if cfg.FromTime != 0 {
		if err := r.SeekTime(cfg.FromTime); err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, journal.ErrNotFound) {
			r.Close()
			return nil, fmt.Errorf("pcap: export %s: seek time %d: %w", id, cfg.FromTime, err)
		}
	}
	return p, nil
}

// add puts a record into the current packet, starting one if needed; it
// reports false when the record belongs in the next packet.
func (p *packer) add(seq wire.Seq, ts int64, data []byte, mark journal.PacketMark) (bool, error) {
	if p.enc.Count() > 0 {
		var join bool
		switch {
		case p.cfg.Coalesce == 0 && mark != journal.PacketUnknown:
			join = mark == journal.PacketSame // as recorded
		default:
			join = p.cfg.Coalesce < 0 || (ts >= p.time && ts-p.time <= int64(p.cfg.Coalesce))
		}
		if !join || !p.enc.Fits(len(data)) {
			return false, nil
		}
	} else {
		p.enc.Reset(p.buf[:0], p.id.Session, seq, p.cfg.PayloadSize)
		p.time = ts
	}
	if err := p.enc.Add(data); err != nil {
		return false, fmt.Errorf("pcap: export %s: message %d: %w", p.id, seq, err)
	}
	if p.st.First == 0 {
		p.st.First = seq
	}
	p.st.Last, p.lastTime = seq, ts
	p.st.Messages++
	return true, nil
}

// advance makes the next packet current, or sets ok false at the end.
func (p *packer) advance() error {
	p.ok = false
	p.enc.Reset(p.buf[:0], p.id.Session, 0, p.cfg.PayloadSize)
	if p.hasCarry {
		p.hasCarry = false
		if _, err := p.add(p.carrySeq, p.carryTime, p.carry, p.carryMark); err != nil {
			return err
		}
	}
	for !p.eof {
		rec, err := p.r.Next()
		if errors.Is(err, io.EOF) {
			p.eof = true
			break
		}
		if err != nil {
			return fmt.Errorf("pcap: export %s: %w", p.id, err)
		}
		if rec.Seq < p.first || rec.Time < p.cfg.FromTime {
			continue // before the selection (SeekTime may land before first)
		}
		if rec.Seq > p.last || rec.Time >= p.toTime {
			p.eof = true
			break
		}
		added, err := p.add(rec.Seq, rec.Time, rec.Data, rec.Packet)
		if err != nil {
			return err
		}
		if !added {
			p.carry = append(p.carry[:0], rec.Data...)
			p.carrySeq, p.carryTime, p.carryMark, p.hasCarry = rec.Seq, rec.Time, rec.Packet, true
			break
		}
		if rec.Seq == p.last {
			p.eof = true
			break
		}
	}
	if p.enc.Count() > 0 {
		p.pkt, p.ok = p.enc.Bytes(), true
		return nil
	}
	if p.ended {
		return nil
	}
	p.ended = true
	// The end of session belongs to the selection when its last record
	// does (or, for a stream without records, when nothing bounds it).
	info, ok := streamInfo(p.j, p.id)
	cfg := p.cfg
	whole := cfg.From == 0 && cfg.To == 0 && cfg.FromTime == 0 && cfg.ToTime == 0
	if ok && info.Ended && ((p.st.Messages > 0 && p.st.Last == info.Next-1) || (info.First == info.Next && whole)) {
		t := p.lastTime
		if p.st.Messages == 0 {
			t = info.LastTime
		}
		p.pkt, p.time, p.ok = wire.AppendEndOfSession(p.buf[:0], p.id.Session, info.Next), t, true
		p.st.End = true
	}
	return nil
}

func streamInfo(j *journal.Journal, id wire.StreamID) (journal.StreamInfo, bool) {
	for _, in := range j.Streams() {
		if in.ID == id {
			return in, true
		}
	}
	return journal.StreamInfo{}, false
}
