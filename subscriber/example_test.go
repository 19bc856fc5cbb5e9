package subscriber_test

import (
	"context"
	"fmt"
	"log"
	"net/netip"
	"os"
	"os/signal"
	"time"

	"github.com/mdbus/mdbus/nak"
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

// A subscriber that recovers what it misses from a retransmitter (a
// retransmit.Server or a rewinder), hears repairs multicast to every
// receiver on a repair group, and reports what could not be recovered.
func ExampleNew_recovery() {
	s, err := subscriber.New(subscriber.Config{
		Group:     netip.MustParseAddrPort("239.1.1.1:30001"),
		Interface: "eth1",
		Recovery: subscriber.Recovery{
			Retransmitter: netip.MustParseAddrPort("10.0.0.5:30100"),
			RepairGroup:   netip.MustParseAddrPort("239.1.1.2:30002"),
		},
		OnMessage: func(m subscriber.Message) {},
		OnLoss: func(l subscriber.Loss) {
			log.Printf("%v: %d messages lost from %d", l.Stream, l.Len(), l.From)
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	// Run until interrupted, then report.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	<-ctx.Done()
	st := s.Stats()
	log.Printf("%d NAKs, %d recovered, %d lost; recovery p50 %v p99 %v",
		st.NAKs, st.Recovered, st.LostMessages, st.RecoveryP50, st.RecoveryP99)
	s.RecoveryHistogram().PercentilesPrint(os.Stdout, 5, 1) // µs
}

// A/B arbitration: the primary and the secondary feed of an exchange carry
// the same sessions from different sources; each message is delivered
// from whichever feed brings it first. Without a retransmitter, what both
// feeds miss is reported lost after 100 ms.
func ExampleNew_ab() {
	s, err := subscriber.New(subscriber.Config{
		Group:           netip.MustParseAddrPort("232.1.1.1:30001"),
		Source:          netip.MustParseAddr("10.1.0.1"),
		Secondary:       netip.MustParseAddrPort("232.1.2.1:30001"),
		SecondarySource: netip.MustParseAddr("10.2.0.1"),
		Interface:       "eth1",
		Recovery: subscriber.Recovery{
			NAK: nak.Config{Delay: 5 * time.Millisecond, Deadline: 100 * time.Millisecond},
		},
		OnMessage: func(m subscriber.Message) {},
		OnLoss:    func(l subscriber.Loss) { log.Printf("both feeds lost %d..%d", l.From, l.To-1) },
	})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
}
