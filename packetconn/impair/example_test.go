package impair_test

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/mdbus/mdbus/internal/sock"
	"github.com/mdbus/mdbus/packetconn/impair"
	"github.com/mdbus/mdbus/wire"
)

// Rules drop exact packets: here the tail of a feed whose last sequence is
// 10, as a test of tail-loss recovery would.
func ExampleDropRange() {
	s, _ := wire.ParseSession("DEMO")
	tail := impair.DropRange(8, 10)
	for seq := wire.Seq(1); seq <= 10; seq += 3 { // packets of up to 3 messages
		var enc wire.Encoder
		enc.Reset(nil, s, seq, wire.DefaultPayloadSizeIPv4)
		for q := seq; q < seq+3 && q <= 10; q++ {
			_ = enc.Add([]byte("msg"))
		}
		fmt.Printf("packet %d+%d dropped: %v\n", seq, enc.Count(), tail(enc.Bytes()))
	}
	fmt.Println("heartbeat dropped:", tail(wire.AppendHeartbeat(nil, s, 11)))
	// Output:
	// packet 1+3 dropped: false
	// packet 4+3 dropped: false
	// packet 7+3 dropped: true
	// packet 10+1 dropped: true
	// heartbeat dropped: false
}

// A test wraps the socket of a subscriber (or any user of
// sock.PacketConn) and reads the impairment's stats afterwards.
func ExampleReceiver() {
	var rx *impair.Conn
	wrap := impair.Receiver(impair.Config{
		Loss: 0.01, Reorder: 0.01, Duplicate: 0.001, Seed: 42,
		OnWrap: func(c *impair.Conn) { rx = c },
	})
	// subscriber.Config{Wrap: wrap, ...}; here, a bare socket:
	lo, _ := net.InterfaceByName("lo")
	group := netip.MustParseAddrPort("239.1.1.1:30000")
	s, err := sock.Open(sock.Config{Local: netip.AddrPortFrom(netip.IPv4Unspecified(), group.Port()), ReusePort: true})
	if err != nil {
		panic(err)
	}
	_ = s.Join(lo, group.Addr(), netip.Addr{})
	conn := wrap(s)
	defer conn.Close()
	b := sock.NewBatch(64, 2048)
	n, _ := conn.ReadBatch(b)
	fmt.Println(n, rx.Stats().Dropped)
}
