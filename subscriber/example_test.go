package subscriber_test

import (
	"fmt"
	"log"
	"net/netip"

	"github.com/mdbus/mdbus/subscriber"
	"github.com/mdbus/mdbus/wire"
)

// A subscriber of one group on the loopback interface. Network examples
// compile but do not run.
func Example() {
	s, err := subscriber.New(subscriber.Config{
		Group:     netip.MustParseAddrPort("239.1.1.1:30001"),
		Interface: "lo",
		OnMessage: func(m subscriber.Message) {
			// m.Data is valid until this function returns.
			fmt.Printf("%v #%d: %d bytes\n", m.Stream, m.Seq, len(m.Data))
		},
		OnGap: func(g subscriber.Gap) {
			log.Printf("%v: %d messages missing from %d", g.Stream, g.Len(), g.From)
		},
		OnEnd: func(id subscriber.StreamID, next wire.Seq) {
			log.Printf("%v ended after %d messages", id, next-1)
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	st := s.Stats()
	log.Printf("%d messages, %d gaps, %d kernel drops, %d dropped as %v",
		st.Messages, st.Gaps, st.KernelDrops, st.Drop(subscriber.DropWrongGroup), subscriber.DropWrongGroup)
}

// A source-specific subscriber of an IPv6 group.
func ExampleNew_sourceSpecific() {
	s, err := subscriber.New(subscriber.Config{
		Group:     netip.MustParseAddrPort("[ff35::8000:1]:30001"),
		Interface: "eth1",
		Source:    netip.MustParseAddr("2001:db8::10"),
		OnMessage: func(m subscriber.Message) {},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
}
