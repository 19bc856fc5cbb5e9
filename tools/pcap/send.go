package pcap

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/mdbus/mdbus/internal/sock"
)

// SendConfig configures a Sender. Group is required; zero and negative
// values follow Config's rule.
type SendConfig struct {
	// Group is the multicast group (or unicast address) and port every
	// packet is sent to. Required.
	Group netip.AddrPort
	// Interface is the interface multicast leaves through; default "lo".
	Interface string
	// TTL is the multicast TTL (hop limit); 0, the default, keeps packets
	// on this host.
	TTL int
	// Speed scales the capture's pacing: 1 (the default) replays at the
	// captured pace, 2 twice as fast, 0.5 half as fast. Negative: none,
	// sends as fast as possible.
	Speed float64
}

// Sender publishes captured MoldUDP64 packets verbatim (session and
// sequences preserved) on a plain UDP socket, paced by their capture
// times. Pacing is anchored to the first packet: each packet is due at
// start + (its time - first time) / Speed, so waiting errors do not add
// up over a long capture. Not safe for concurrent use.
type Sender struct {
	cfg   SendConfig
	conn  *sock.Conn
	t0    int64     // capture time of the first packet
	start time.Time // wall time it was sent
	sent  uint64
	timer *time.Timer
}

// NewSender opens the socket.
func NewSender(cfg SendConfig) (*Sender, error) {
	if !cfg.Group.IsValid() || cfg.Group.Port() == 0 {
		return nil, fmt.Errorf("pcap: send: group %s: want an address and a non-zero port", cfg.Group)
	}
	if cfg.Interface == "" {
		cfg.Interface = "lo"
	}
	if cfg.Speed == 0 {
		cfg.Speed = 1
	}
	if cfg.TTL < 0 || cfg.TTL > 255 {
		return nil, fmt.Errorf("%w: send: TTL %d outside [0, 255]", ErrConfig, cfg.TTL)
	}
	group := netip.AddrPortFrom(cfg.Group.Addr().Unmap(), cfg.Group.Port())
	cfg.Group = group
	ifi, err := net.InterfaceByName(cfg.Interface)
	if err != nil {
		return nil, fmt.Errorf("pcap: send: interface %q: %w", cfg.Interface, err)
	}
	local := netip.AddrPortFrom(netip.IPv4Unspecified(), 0)
	if !group.Addr().Is4() {
		local = netip.AddrPortFrom(netip.IPv6Unspecified(), 0)
	}
	c, err := sock.Open(sock.Config{Local: local, Interface: ifi, TTL: cfg.TTL, Loopback: true, SendOnly: true})
	if err != nil {
		return nil, fmt.Errorf("pcap: send to %s on %s: %w", group, cfg.Interface, err)
	}
	return &Sender{cfg: cfg, conn: c}, nil
}

// Send waits until ev is due and sends its packet. It returns ctx's error
// if ctx ends first.
func (s *Sender) Send(ctx context.Context, ev Event) error {
	if s.sent == 0 {
		s.t0, s.start = ev.Time, time.Now()
	} else if s.cfg.Speed > 0 {
		due := s.start.Add(time.Duration(float64(ev.Time-s.t0) / s.cfg.Speed))
		if d := time.Until(due); d > 0 {
			if s.timer == nil {
				s.timer = time.NewTimer(d)
			} else {
				s.timer.Reset(d)
			}
			select {
			case <-ctx.Done():
				s.timer.Stop()
				return ctx.Err()
			case <-s.timer.C:
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.conn.WriteTo(ev.Packet, s.cfg.Group); err != nil {
		return fmt.Errorf("pcap: send to %s: %w", s.cfg.Group, err)
	}
	s.sent++
	return nil
}

// Sent is the number of packets sent.
func (s *Sender) Sent() uint64 { return s.sent }

// Close closes the socket.
func (s *Sender) Close() error {
	if s.timer != nil {
		s.timer.Stop()
	}
	return s.conn.Close()
}
