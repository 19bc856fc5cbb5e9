package publisher

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/mdbus/mdbus/internal/cfgcheck"
	"github.com/mdbus/mdbus/packetconn"
	"github.com/mdbus/mdbus/wire"
)

// SendMode says who sends a packet: the call that published into it, or
// the publication's sending goroutine. Whatever the mode, a Publish that
// arrives while a send is in progress only appends, and what piled up
// meanwhile goes to the sending goroutine, which packs it (see the package
// doc, "Send state").
type SendMode uint8

const (
	// SendAuto, the default: a Publish or PublishBatch that seals whole
	// packets while nothing is being sent sends them itself, which spares
	// a goroutine wake-up per batch and, on a machine with few cores, a
	// third busy thread (package doc, "Full packets leave with the call
	// that filled them"); a partly filled packet goes to the sending
	// goroutine at once, or once it has waited Config.Linger.
	SendAuto SendMode = iota
	// SendInline sends a partly filled packet on the caller's goroutine
	// too when nothing is being sent: a lone message leaves at once
	// without a goroutine wake-up, at the cost of a sendmmsg call inside
	// Publish. A single goroutine publishing in a tight loop then sends
	// one packet per Publish (use PublishBatch, or SendAuto, to pack).
	// It takes no Linger, which exists for the opposite trade.
	SendInline
	// SendBackground makes the sending goroutine send every packet:
	// Publish and PublishBatch never make a system call; they append and
	// wake the goroutine. For a caller that must never wait for the
	// kernel and has a core to spare.
	SendBackground
)

func (m SendMode) String() string {
	switch m {
	case SendAuto:
		return "auto"
	case SendInline:
		return "inline"
	case SendBackground:
		return "background"
	}
	return fmt.Sprintf("SendMode(%d)", uint8(m))
}

// Sink is offered every data packet just before it is sent, so that a
// cache holds it before any subscriber can notice it missing and ask for it
// (a subscriber may NAK microseconds after the next packet arrives). A
// packet the kernel then refuses was still offered: its sequence numbers are
// spent either way, and a cache or journal that holds it lets subscribers
// repair the hole. Heartbeats and the end of session are not offered.
//
// SentPacket is called on the goroutine that sent the packet: the
// publication's sending goroutine, or the goroutine that called Publish or
// PublishBatch when that call sent inline (see SendMode). pkt is the whole
// MoldUDP64 packet (header included) and is valid only during the call: a
// Sink that keeps it must copy it. SentPacket must not call back into the
// Publication and should return quickly, since the next packets wait for
// it.
//
// A retransmit.Cache is handed each packet through SentValidPacket instead
// (the header's fields beside the message blocks, under the same rules),
// so that it need not walk every message again to validate a packet the
// publication encoded itself; only sinks of this module can take that path.
type Sink interface {
	SentPacket(pkt []byte)
}

// AfterSendSink is a Sink that is also told, on the same goroutine, each
// time a batch of the packets it was offered has been handed to the
// kernel: work that must not delay those packets goes there (a
// retransmit.Cache answers the re-requests queued at its servers).
// AfterSend has the same rules as SentPacket.
type AfterSendSink interface {
	Sink
	AfterSend()
}

// Config describes a Publication. Group is required.
//
// One rule for the values of every field: the zero value means the
// default, so a Config that sets only Group is a working publication. A
// negative value means "none" or "off" only for the fields whose doc says
// "negative:" (HeartbeatInterval, WriteBuffer, Grace); for every other
// field a negative value is invalid and New returns an error wrapping
// ErrConfig that names it.
type Config struct {
	// Group is the IPv4 or IPv6 multicast group and UDP port to publish
	// to. Required.
	Group netip.AddrPort
	// Interface is the network interface multicast leaves through;
	// default "lo". IPv6 multicast does not work over lo on Linux: give
	// IPv6 groups a real (or veth) interface.
	Interface string
	// Source is the local address to bind, which becomes the packets'
	// source address (for example 127.0.0.2, to tell several publishers on
	// one host apart). Default: the wildcard address of the group's family.
	Source netip.Addr
	// TTL is the multicast TTL (IPv4) or hop limit (IPv6), 0 to 255.
	// Default 0: packets stay on this host.
	TTL int
	// DisableLoopback turns IP_MULTICAST_LOOP off, so subscribers on this
	// host do not hear the publication. Default false: they do. On lo it
	// has no effect: what is sent through lo is received through it.
	DisableLoopback bool
	// Session is the MoldUDP64 session name, 1 to 10 printable ASCII
	// characters. Default: wire.NewSession(), a random one.
	Session string
	// FirstSeq is the sequence number of the first message. Default 1.
	FirstSeq wire.Seq
	// PayloadSize is the largest UDP payload (MoldUDP64 packet) in bytes,
	// from wire.MinPayloadSize to wire.MaxPayloadSize. Default: what fits
	// a 1500-byte MTU, wire.DefaultPayloadSizeIPv4 or
	// wire.DefaultPayloadSizeIPv6 by the group's family.
	PayloadSize int
	// HeartbeatInterval is how long the publication may send nothing
	// before it sends a heartbeat carrying the next sequence number.
	// Default 1 s, as MoldUDP64 suggests; negative: no heartbeats.
	HeartbeatInterval time.Duration
	// RateMessages caps the publishing rate in messages per second; 0
	// means no cap. Publish sleeps when over.
	RateMessages float64
	// RateBytes caps the publishing rate in UDP payload bytes per second
	// (MoldUDP64 headers and length prefixes included); 0 means no cap.
	RateBytes float64
	// WriteBuffer is the SO_SNDBUF request in bytes. Default 4 MiB;
	// negative: no request (the kernel's default stays).
	WriteBuffer int
	// BatchPackets is the largest number of packets handed to the kernel
	// in one sendmmsg call, 1 to 1024. Default 64.
	BatchPackets int
	// QueuePackets is the number of packet buffers (each PayloadSize
	// bytes) that may be filling or in flight. When all are taken,
	// Publish blocks until the sender frees one (backpressure). Default
	// 1024, lowered for large payload sizes so the ring stays within
	// 16 MiB (but at least 16 packets).
	QueuePackets int
	// Send says who hands packets to the kernel: the Publish or
	// PublishBatch that filled them, or the sending goroutine; see
	// SendMode. Default SendAuto.
	Send SendMode
	// Inline is the former spelling of Send: SendInline.
	//
	// Deprecated: use Send: SendInline.
	Inline bool
	// Background is the former spelling of Send: SendBackground.
	//
	// Deprecated: use Send: SendBackground.
	Background bool
	// Linger is how long a partly filled packet may wait for more
	// messages before the sending goroutine sends it. Zero (the default)
	// sends whatever is pending as soon as the sender is free: the lowest
	// latency, but a publisher that is not far ahead of the sender then
	// sends many small packets, and each packet costs the kernel (and
	// every subscriber) about as much as a full one. A throughput-bound
	// publisher (a metrics relay, a bulk replay, a benchmark) sets a
	// Linger of tens of microseconds to a millisecond: packets leave
	// full, or when the oldest message in them has waited Linger
	// (counted from the end of the Publish or PublishBatch that left the
	// packet open, so a batch's own append time does not count). A full
	// packet, Flush and Close never wait. Linger cannot be combined with
	// SendInline (which exists for the opposite trade) and is at most
	// MaxLinger.
	Linger time.Duration
	// DisableGSO turns UDP generic segmentation offload off: every packet
	// then takes its own sendmmsg slot. Default false: runs of equal-size
	// packets go to the kernel as GSO trains where it offers UDP_SEGMENT,
	// with an automatic fallback (see the package doc, "UDP GSO").
	DisableGSO bool
	// Sinks are offered every data packet; see Sink.
	Sinks []Sink
	// Grace is how long Close goes on after sending the end of session:
	// it repeats the end of session every HeartbeatInterval (at least 5
	// times over Grace), so that a subscriber that lost the last packets
	// learns of it, and returns only then, so that a retransmit server
	// fed by the Sinks is still there to answer its re-requests (the
	// caller closes that server after Close). MoldUDP64 servers accept
	// re-requests after the end of session for the same reason. Default:
	// DefaultGrace (1 s, the default NAK deadline of subscribers) when
	// there are Sinks, 0 otherwise (nothing would answer the re-requests);
	// negative: none.
	Grace time.Duration
	// Wrap, when set, wraps the socket, for example with the impairment
	// layer in tests. Closing the wrapped PacketConn must close the socket.
	Wrap func(packetconn.PacketConn) packetconn.PacketConn
	// Logger receives rare events (send errors). Default: discard.
	Logger *slog.Logger
	// goTimers puts the sending goroutine on Go timers alone, without
	// the kernel's timer beside them (Publication.nudge): a test in a
	// testing/synctest bubble needs it, since a goroutine waiting on the
	// network poller stops virtual time. Set by export_test.go.
	goTimers bool
}

// Defaults.
const (
	DefaultInterface         = "lo"
	DefaultHeartbeatInterval = time.Second
	DefaultWriteBuffer       = 4 << 20
	DefaultBatchPackets      = 64
	DefaultQueuePackets      = 1024
	// MaxBatchPackets is the kernel's limit on messages per sendmmsg
	// (UIO_MAXIOV).
	MaxBatchPackets = 1024
	// MaxLinger bounds Config.Linger.
	MaxLinger = time.Second
	// DefaultGrace is Config.Grace when zero and there are Sinks: the
	// default deadline after which a subscriber gives up a gap
	// (nak.DefaultDeadline).
	DefaultGrace = time.Second
	// MaxGrace bounds Config.Grace.
	MaxGrace = time.Minute
	// minGraceEnds is how many ends of session Close sends at least over
	// Grace, whatever the heartbeat interval.
	minGraceEnds    = 5
	maxRingBytes    = 16 << 20
	minQueuePackets = 16
)

var (
	// ErrClosed is returned by calls on a closed (or closing) Publication.
	ErrClosed = errors.New("publisher: publication closed")
	// ErrMessageTooLarge matches (errors.Is) a message that cannot fit in
	// one packet of the configured payload size. It wraps
	// wire.ErrMessageTooLarge, so errors.Is with either works.
	ErrMessageTooLarge = fmt.Errorf("publisher: %w", wire.ErrMessageTooLarge)
	// ErrBadGroup matches a Config.Group that is missing or not a
	// multicast group.
	ErrBadGroup = errors.New("publisher: bad group address")
	// ErrNoInterface matches a Config.Interface that does not exist.
	ErrNoInterface = errors.New("publisher: no such interface")
	// ErrConfig matches any other invalid Config field.
	ErrConfig = errors.New("publisher: invalid config")
)

// settings is a validated Config with defaults applied.
type settings struct {
	Config
	group   netip.AddrPort
	ifi     *net.Interface
	session wire.Session
	maxMsg  int
	// endEvery is how often Close repeats the end of session during the
	// grace period.
	endEvery time.Duration
}

// withDefaults validates c and returns it with defaults applied, or an
// error naming the first invalid field.
func (c Config) withDefaults() (settings, error) {
	s := settings{Config: c}
	g := c.Group
	if !g.IsValid() || !g.Addr().IsValid() {
		return s, fmt.Errorf("%w: Config.Group is required (an IPv4 or IPv6 multicast group and port)", ErrBadGroup)
	}
	g = netip.AddrPortFrom(g.Addr().Unmap(), g.Port())
	if !g.Addr().IsMulticast() {
		return s, fmt.Errorf("%w: %s is not a multicast address (want 224.0.0.0/4 or ff00::/8)", ErrBadGroup, g.Addr())
	}
	if g.Port() == 0 {
		return s, fmt.Errorf("%w: %s has port 0", ErrBadGroup, g)
	}
	s.group = g
	v6 := g.Addr().Is6()

	if s.Interface == "" {
		s.Interface = DefaultInterface
	}
	ifi, err := net.InterfaceByName(s.Interface)
	if err != nil {
		return s, fmt.Errorf("%w: %q (this host has: %s)", ErrNoInterface, s.Interface, interfaceNames())
	}
	s.ifi = ifi

	if s.Source.IsValid() {
		s.Source = s.Source.Unmap()
		if s.Source.Is6() != v6 {
			return s, fmt.Errorf("%w: Source %s and Group %s are of different address families", ErrConfig, s.Source, g.Addr())
		}
		if s.Source.IsMulticast() {
			return s, fmt.Errorf("%w: Source %s is a multicast address", ErrConfig, s.Source)
		}
	}
	if s.TTL < 0 || s.TTL > 255 {
		return s, fmt.Errorf("%w: TTL %d out of range 0..255", ErrConfig, s.TTL)
	}
	if s.Session == "" {
		s.session = wire.NewSession()
	} else if s.session, err = wire.ParseSession(s.Session); err != nil {
		return s, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if s.FirstSeq == wire.InvalidSeq {
		s.FirstSeq = 1
	}
	switch {
	case s.PayloadSize == 0 && v6:
		s.PayloadSize = wire.DefaultPayloadSizeIPv6
	case s.PayloadSize == 0:
		s.PayloadSize = wire.DefaultPayloadSizeIPv4
	case s.PayloadSize < wire.MinPayloadSize || s.PayloadSize > wire.MaxPayloadSize:
		return s, fmt.Errorf("%w: PayloadSize %d out of range %d..%d", ErrConfig, s.PayloadSize, wire.MinPayloadSize, wire.MaxPayloadSize)
	}
	s.maxMsg = wire.MaxMessageLen(s.PayloadSize)
	if s.HeartbeatInterval == 0 {
		s.HeartbeatInterval = DefaultHeartbeatInterval
	}
	for _, r := range []struct {
		name string
		v    float64
	}{{"RateMessages", s.RateMessages}, {"RateBytes", s.RateBytes}} {
		if r.v < 0 || r.v != r.v {
			return s, fmt.Errorf("%w: %s %g: want a rate of 0 (no cap) or more", ErrConfig, r.name, r.v)
		}
	}
	if err := s.sendMode(); err != nil {
		return s, err
	}
	switch {
	case s.Linger < 0 || s.Linger > MaxLinger:
		return s, fmt.Errorf("%w: Linger %v out of range 0..%v", ErrConfig, s.Linger, MaxLinger)
	case s.Linger > 0 && s.Send == SendInline:
		return s, fmt.Errorf("%w: Linger and SendInline cannot be combined (SendInline sends each Publish at once; Linger waits to fill packets)", ErrConfig)
	}
	s.WriteBuffer = cfgcheck.OrNone(s.WriteBuffer, DefaultWriteBuffer)
	switch {
	case s.BatchPackets == 0:
		s.BatchPackets = DefaultBatchPackets
	case s.BatchPackets < 0 || s.BatchPackets > MaxBatchPackets:
		return s, fmt.Errorf("%w: BatchPackets %d out of range 1..%d", ErrConfig, s.BatchPackets, MaxBatchPackets)
	}
	switch {
	case s.QueuePackets == 0:
		s.QueuePackets = max(minQueuePackets, min(DefaultQueuePackets, maxRingBytes/s.PayloadSize))
	case s.QueuePackets < 0:
		return s, fmt.Errorf("%w: QueuePackets %d is negative", ErrConfig, s.QueuePackets)
	}
	s.BatchPackets = min(s.BatchPackets, s.QueuePackets)
	switch {
	case s.Grace == 0 && len(s.Sinks) > 0:
		s.Grace = DefaultGrace
	case s.Grace < 0:
		s.Grace = 0
	case s.Grace > MaxGrace:
		return s, fmt.Errorf("%w: Grace %v above %v", ErrConfig, s.Grace, MaxGrace)
	}
	if s.Grace > 0 {
		s.endEvery = s.Grace / minGraceEnds
		if s.HeartbeatInterval > 0 {
			s.endEvery = min(s.endEvery, s.HeartbeatInterval)
		}
	}
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	for i, sk := range s.Sinks {
		if sk == nil {
			return s, fmt.Errorf("%w: Sinks[%d] is nil", ErrConfig, i)
		}
	}
	return s, nil
}

// sendMode checks Send and folds the deprecated Inline and Background
// into it.
func (s *settings) sendMode() error {
	if s.Send > SendBackground {
		return fmt.Errorf("%w: Send %v unknown (want SendAuto, SendInline or SendBackground)", ErrConfig, s.Send)
	}
	for _, old := range []struct {
		set  bool
		mode SendMode
		name string
	}{{s.Inline, SendInline, "Inline"}, {s.Background, SendBackground, "Background"}} {
		if !old.set {
			continue
		}
		if s.Send != SendAuto && s.Send != old.mode {
			return fmt.Errorf("%w: deprecated %s and Send %v cannot be combined (use Send alone)", ErrConfig, old.name, s.Send)
		}
		s.Send = old.mode
	}
	s.Inline, s.Background = false, false
	return nil
}

// interfaceNames lists the host's interfaces for an error message.
func interfaceNames() string {
	ifs, err := net.Interfaces()
	if err != nil {
		return "unknown: " + err.Error()
	}
	names := make([]string, 0, len(ifs))
	for _, ifi := range ifs {
		names = append(names, ifi.Name)
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
