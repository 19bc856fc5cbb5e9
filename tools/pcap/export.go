package pcap

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net/netip"
	"time"

	"github.com/mdbus/mdbus/journal"
	"github.com/mdbus/mdbus/wire"
)

// DefaultExportGroup is where exported packets are addressed when neither
// ExportConfig.Group nor a source address of the group's family says
// otherwise: mdbus's default group.
var DefaultExportGroup = netip.MustParseAddrPort("239.192.0.1:31001")

// ExportConfig selects and shapes what Export writes. The zero value
// exports the whole stream to DefaultExportGroup.
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
	// 0 (the default) packs only messages of the same timestamp: a
	// journal records every message of a packet with the packet's time,
	// so the packets come out as they were sent. Negative packs up to
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
func Export(w *Writer, j *journal.Journal, id journal.StreamID, cfg ExportConfig) (ExportStats, error) {
	var st ExportStats
	if !cfg.Group.IsValid() {
		cfg.Group = DefaultExportGroup
	}
	group := netip.AddrPortFrom(cfg.Group.Addr().Unmap(), cfg.Group.Port())
	v6 := !group.Addr().Is4()
	if !cfg.Source.IsValid() {
		cfg.Source = id.Source
	}
	src := netip.AddrPortFrom(cfg.Source.Addr().Unmap(), cfg.Source.Port())
	if !src.IsValid() || src.Addr().Is4() == v6 {
		lo := netip.MustParseAddr("127.0.0.1")
		if v6 {
			lo = netip.IPv6Loopback()
		}
		src = netip.AddrPortFrom(lo, 31000)
	}
	if cfg.PayloadSize <= 0 {
		cfg.PayloadSize = wire.DefaultPayloadSizeIPv4
		if v6 {
			cfg.PayloadSize = wire.DefaultPayloadSizeIPv6
		}
	}
	if cfg.PayloadSize < wire.MinPayloadSize || cfg.PayloadSize > wire.MaxPayloadSize {
		return st, fmt.Errorf("pcap: export: payload size %d outside [%d, %d]", cfg.PayloadSize, wire.MinPayloadSize, wire.MaxPayloadSize)
	}
	toTime := cfg.ToTime
	if toTime == 0 {
		toTime = math.MaxInt64
	}
	r, err := j.OpenReader(id)
	if err != nil {
		return st, fmt.Errorf("pcap: export %s: %w", id, err)
	}
	defer r.Close()
	first, next := r.Bounds()
	if cfg.From > first {
		first = cfg.From
	}
	last := next - 1
	if cfg.To != 0 && cfg.To < last {
		last = cfg.To
	}
	if first < next {
		if err := r.SeekSeq(first); err != nil {
			return st, fmt.Errorf("pcap: export %s: seek %d: %w", id, first, err)
		}
	}
	if cfg.FromTime != 0 {
		if err := r.SeekTime(cfg.FromTime); err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, journal.ErrNotFound) {
			return st, fmt.Errorf("pcap: export %s: seek time %d: %w", id, cfg.FromTime, err)
		}
	}
	var (
		enc     wire.Encoder
		buf     = make([]byte, 0, cfg.PayloadSize)
		pktTime int64
		lastT   int64
	)
	flush := func() error {
		if enc.Count() == 0 {
			return nil
		}
		if err := w.WritePacket(pktTime, src, group, enc.Bytes()); err != nil {
			return err
		}
		st.Packets++
		return nil
	}
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return st, fmt.Errorf("pcap: export %s: %w", id, err)
		}
		if rec.Seq < first || rec.Time < cfg.FromTime {
			continue // before the selection (SeekTime may land before first)
		}
		if rec.Seq > last || rec.Time >= toTime {
			break
		}
		join := enc.Count() > 0 && (cfg.Coalesce < 0 || (rec.Time >= pktTime && rec.Time-pktTime <= int64(cfg.Coalesce)))
		if !join || !enc.Fits(len(rec.Data)) {
			if err := flush(); err != nil {
				return st, err
			}
			enc.Reset(buf[:0], id.Session, rec.Seq, cfg.PayloadSize)
			pktTime = rec.Time
		}
		if err := enc.Add(rec.Data); err != nil {
			return st, fmt.Errorf("pcap: export %s: message %d: %w", id, rec.Seq, err)
		}
		if st.First == 0 {
			st.First = rec.Seq
		}
		st.Last, lastT = rec.Seq, rec.Time
		st.Messages++
		if rec.Seq == last {
			break
		}
	}
	if err := flush(); err != nil {
		return st, err
	}
	// The end of session belongs to the selection when its last record
	// does (or, for a stream without records, when nothing bounds it).
	info, ok := streamInfo(j, id)
	whole := cfg.From == 0 && cfg.To == 0 && cfg.FromTime == 0 && cfg.ToTime == 0
	if ok && info.Ended && ((st.Messages > 0 && st.Last == info.Next-1) || (info.First == info.Next && whole)) {
		if st.Messages == 0 {
			lastT = info.LastTime
		}
		eos := wire.AppendEndOfSession(buf[:0], id.Session, info.Next)
		if err := w.WritePacket(lastT, src, group, eos); err != nil {
			return st, err
		}
		st.Packets++
		st.End = true
	}
	return st, nil
}

func streamInfo(j *journal.Journal, id journal.StreamID) (journal.StreamInfo, bool) {
	for _, in := range j.Streams() {
		if in.ID == id {
			return in, true
		}
	}
	return journal.StreamInfo{}, false
}
