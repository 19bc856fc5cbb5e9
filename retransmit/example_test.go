package retransmit_test

import (
	"fmt"
	"net/netip"

	"github.com/mdbus/mdbus/retransmit"
	"github.com/mdbus/mdbus/wire"
)

func ExampleCache() {
	cache := retransmit.NewCache(retransmit.CacheConfig{MaxMessages: 1000})
	session, _ := wire.ParseSession("DEMO")

	// The publisher hands every packet it sent to its sinks.
	var enc wire.Encoder
	enc.Reset(nil, session, 1, wire.DefaultPayloadSizeIPv4)
	for _, m := range []string{"alpha", "beta", "gamma"} {
		_ = enc.Add([]byte(m))
	}
	cache.SentPacket(enc.Bytes())

	first, next, _ := cache.Bounds(session)
	fmt.Printf("cached [%d, %d)\n", first, next)

	// A server builds repair packets into its own buffers.
	pkts := [][]byte{make([]byte, 0, wire.DefaultPayloadSizeIPv4)}
	n, msgs, _ := cache.AppendPackets(pkts, session, 2, 10, wire.DefaultPayloadSizeIPv4)
	p, _ := wire.ParsePacket(pkts[0])
	fmt.Println(n, "packet,", msgs, "messages from", p.Seq)
	for it := p.Messages(); ; {
		msg, seq, ok := it.Next()
		if !ok {
			break
		}
		fmt.Println(seq, string(msg))
	}
	// Output:
	// cached [1, 4)
	// 1 packet, 2 messages from 2
	// 2 beta
	// 3 gamma
}

func ExampleNewServer() {
	cache := retransmit.NewCache(retransmit.CacheConfig{})
	srv, err := retransmit.NewServer(retransmit.ServerConfig{
		Listen:      netip.MustParseAddrPort("127.0.0.1:0"),
		Sources:     []retransmit.Source{cache},
		RepairGroup: netip.MustParseAddrPort("239.1.2.3:30100"), // optional
		Interface:   "lo",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()
	fmt.Println("send re-requests to", srv.Addr())
	// Subscribers send wire.AppendRequest(nil, wire.Request{...}) to
	// srv.Addr(); srv.Stats() counts what it answered and refused.
}
