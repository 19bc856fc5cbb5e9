package pcap

import (
	"bufio"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/netip"
	"slices"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/mdbus/mdbus/wire"
)

// ErrConfig marks a configuration this package refuses. Match with
// errors.Is.
var ErrConfig = errors.New("pcap: invalid config")

// Config tunes a Reader. The zero value reads every MoldUDP64 datagram.
//
// One rule for the values of every field, here and in Reassembly,
// SendConfig, ImportConfig and ExportConfig: the zero value means the
// default. A negative value means "none" only for the fields whose doc
// says "negative:" (SendConfig.Speed, ImportConfig.MaxStreams and
// Reorder, ExportConfig.Coalesce); for every other field a negative
// value is invalid: NewReader, NewSender, Export and the Check methods
// return an error wrapping ErrConfig that names it. NewImporter and
// NewDecoder, which cannot fail, take such a value as zero: Check their
// configs first.
type Config struct {
	// Name names the capture in errors (usually its path).
	Name string
	// Ports keeps only datagrams to these UDP destination ports; empty
	// keeps every port.
	Ports []uint16
	// Dsts keeps only datagrams to these destination addresses (groups);
	// empty keeps every address.
	Dsts []netip.Addr
	// Reassembly bounds IP fragment reassembly.
	Reassembly Reassembly
}

// Event is one MoldUDP64 downstream datagram found in a capture.
type Event struct {
	// Time is the capture timestamp, ns since the Unix epoch.
	Time int64
	// Src and Dst are the UDP source and destination.
	Src, Dst netip.AddrPort
	// Packet is the UDP payload, a valid MoldUDP64 downstream packet
	// (data, heartbeat or end of session). It refers to the Reader's
	// buffer and is valid until the next call to Next.
	Packet []byte
	// Frame is the number of the captured packet in the file, from 1 (for
	// a reassembled datagram, the frame that completed it).
	Frame uint64
}

// Capture file formats.
const (
	FormatPcap   = "pcap"
	FormatPcapNG = "pcapng"
)

// Magic numbers. Part of the pcap and pcapng formats; do not change.
const (
	magicPcapMicro   = 0xA1B2C3D4
	magicPcapNano    = 0xA1B23C4D
	magicPcapNGSHB   = 0x0A0D0D0A
	pcapFileHdrLen   = 24
	pcapRecordHdrLen = 16
)

// linkUnknown stands for an interface the file never described.
const linkUnknown LinkType = 0xFFFFFFFF

// ErrFormat matches a file that is neither pcap nor pcapng.
var ErrFormat = errors.New("pcap: not a pcap or pcapng file")

// ErrTruncatedFile matches a capture that ends inside a packet record.
var ErrTruncatedFile = errors.New("pcap: file ends inside a packet record")

// packetSource is what pcapgo's two readers share.
type packetSource interface {
	ZeroCopyReadPacketData() ([]byte, gopacket.CaptureInfo, error)
}

// Reader reads the MoldUDP64 datagrams of one pcap or pcapng capture.
// Neither safe for concurrent use nor allocating per packet (past the
// library's buffers, which grow to the largest packet).
type Reader struct {
	cfg    Config
	src    packetSource
	ng     *pcapgo.NgReader
	link   LinkType // pcap: the file's link type
	format string
	offset int64 // pcap (not gzip): byte offset of the next record
	exact  bool  // offset is exact
	dec    Decoder
	stats  Stats
	done   bool
}

// NewReader reads the capture header from r (pcap of either timestamp
// resolution and byte order, or pcapng; either may be gzip-compressed).
func NewReader(r io.Reader, cfg Config) (*Reader, error) {
	if cfg.Name == "" {
		cfg.Name = "capture"
	}
	if err := cfg.Reassembly.Check(); err != nil {
		return nil, err
	}
	rd := &Reader{cfg: cfg}
	rd.dec.frag.init(cfg.Reassembly.withDefaults())
	br := bufio.NewReader(r)
	head, err := br.Peek(4)
	if len(head) >= 2 && head[0] == 0x1f && head[1] == 0x8b {
		zr, zerr := gzip.NewReader(br)
		if zerr != nil {
			return nil, fmt.Errorf("pcap: %s: gzip: %w", cfg.Name, zerr)
		}
		br = bufio.NewReader(zr)
		head, err = br.Peek(4)
	} else {
		rd.exact = true
	}
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: %w (%d bytes, shorter than any capture header)", cfg.Name, ErrFormat, len(head))
		}
		return nil, fmt.Errorf("pcap: %s: %w", cfg.Name, err)
	}
	le, be := binary.LittleEndian.Uint32(head), binary.BigEndian.Uint32(head)
	switch {
	case le == magicPcapNGSHB:
		ng, err := pcapgo.NewNgReader(br, pcapgo.NgReaderOptions{WantMixedLinkType: true, SkipUnknownVersion: true})
		if err != nil {
			return nil, fmt.Errorf("pcap: %s: pcapng section header: %w", cfg.Name, err)
		}
		rd.src, rd.ng, rd.format, rd.exact = ng, ng, FormatPcapNG, false
	case le == magicPcapMicro || le == magicPcapNano || be == magicPcapMicro || be == magicPcapNano:
		pr, err := pcapgo.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("pcap: %s: pcap file header: %w", cfg.Name, err)
		}
		rd.src, rd.link, rd.format, rd.offset = pr, LinkType(pr.LinkType()), FormatPcap, pcapFileHdrLen
	default:
		return nil, fmt.Errorf("%s: %w (it starts with %x)", cfg.Name, ErrFormat, head)
	}
	return rd, nil
}

// Format is FormatPcap or FormatPcapNG.
func (r *Reader) Format() string { return r.format }

// Stats returns the counts so far.
func (r *Reader) Stats() Stats {
	s := r.stats
	s.Reassembled, s.ReassemblyDropped = r.dec.frag.rebuilt, r.dec.frag.dropped
	return s
}

// where names the position of the packet being read, for errors.
func (r *Reader) where() string {
	if r.exact {
		return fmt.Sprintf("packet %d at byte offset %d", r.stats.Frames+1, r.offset)
	}
	return fmt.Sprintf("packet %d (after %d good packets)", r.stats.Frames+1, r.stats.Frames)
}

// Next returns the next MoldUDP64 datagram, io.EOF at the end of the
// capture. Frames that give none are counted in Stats. An error other
// than io.EOF names the file and the packet; reading stops there.
func (r *Reader) Next() (Event, error) {
	for {
		if r.done {
			return Event{}, io.EOF
		}
		data, ci, err := r.src.ZeroCopyReadPacketData()
		if err != nil {
			r.done = true
			r.dec.frag.flush()
			if err == io.EOF {
				return Event{}, io.EOF
			}
			if errors.Is(err, io.ErrUnexpectedEOF) {
				return Event{}, fmt.Errorf("%s: %s: %w", r.cfg.Name, r.where(), ErrTruncatedFile)
			}
			return Event{}, fmt.Errorf("pcap: %s: %s: %w", r.cfg.Name, r.where(), err)
		}
		r.offset += int64(pcapRecordHdrLen + len(data))
		r.stats.Frames++
		lt := r.link
		if r.ng != nil {
			lt = r.ngLinkType(ci.InterfaceIndex)
		}
		if ci.Length > len(data) {
			r.stats.Truncated++
		}
		ts := ci.Timestamp.UnixNano()
		dg, reason, ok := r.dec.Decode(lt, data, ci.Length, ts)
		if ok {
			reason, ok = r.accept(dg)
		}
		if !ok {
			r.stats.Skipped[reason]++
			continue
		}
		r.stats.Events++
		return Event{Time: ts, Src: dg.Src, Dst: dg.Dst, Packet: dg.Payload, Frame: r.stats.Frames}, nil
	}
}

// ngLinkType is the link type of pcapng interface i of the current
// section (a later section brings its own interfaces).
func (r *Reader) ngLinkType(i int) LinkType {
	ifc, err := r.ng.Interface(i)
	if err != nil {
		return linkUnknown
	}
	return LinkType(ifc.LinkType)
}

// accept applies the filter and checks the payload is MoldUDP64.
func (r *Reader) accept(dg Datagram) (Reason, bool) {
	if len(r.cfg.Ports) > 0 && !slices.Contains(r.cfg.Ports, dg.Dst.Port()) {
		return ReasonFiltered, false
	}
	if len(r.cfg.Dsts) > 0 && !slices.Contains(r.cfg.Dsts, dg.Dst.Addr()) {
		return ReasonFiltered, false
	}
	if _, err := wire.ParsePacket(dg.Payload); err != nil {
		if _, rerr := wire.ParseRequest(dg.Payload); rerr == nil {
			return ReasonRequest, false
		}
		return ReasonNotMoldUDP64, false
	}
	return 0, true
}

// Events iterates over the remaining events; a read error other than the
// end of the capture is yielded last, with a zero Event. Each Event's
// Packet is valid until the loop body returns.
//
//	for ev, err := range r.Events() {
//		if err != nil { ... }
//	}
func (r *Reader) Events() iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		for {
			ev, err := r.Next()
			if errors.Is(err, io.EOF) {
				return
			}
			if !yield(ev, err) || err != nil {
				return
			}
		}
	}
}
