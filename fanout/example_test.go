package fanout_test

import (
	"context"
	"fmt"
	"log"
	"net/netip"

	"github.com/mdbus/mdbus/fanout"
	"github.com/mdbus/mdbus/subscriber"
)

// The host's one subscriber to a feed, writing the ring that local readers
// read (what "mdbus fanout" runs).
func ExampleNewWriter() {
	group := netip.MustParseAddrPort("239.192.0.1:31001")
	w, err := fanout.NewWriter(fanout.WriterConfig{Feed: subscriber.Config{
		Group: group,
		Recovery: subscriber.Recovery{
			Retransmitter: netip.MustParseAddrPort("127.0.0.1:31100"),
		},
	}})
	if err != nil {
		log.Fatal(err)
	}
	defer w.Close()
	fmt.Println("readers open", w.Path())
}

// A consumer of the ring, with a goroutine of its own: the subscriber's
// callbacks, no socket.
func ExampleNewReader() {
	retransmitter := netip.MustParseAddrPort("127.0.0.1:31100")
	r, err := fanout.NewReader(fanout.ReaderConfig{
		Path:          fanout.Path("", fanout.Name(netip.MustParseAddrPort("239.192.0.1:31001"))),
		Retransmitter: retransmitter, // what a lapped reader missed
		OnMessage: func(m subscriber.Message) {
			fmt.Printf("%s %d %x\n", m.Stream.Session, m.Seq, m.Data) // copy m.Data to keep it
		},
		OnLoss: func(l subscriber.Loss) { log.Printf("lost [%d, %d)", l.From, l.To) },
		OnLap:  func(l fanout.Lap) { log.Printf("lapped by %d bytes: catching up", l.Behind) },
	})
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
}

// A consumer that polls on a goroutine of its own (a busy loop pinned to a
// core, or a loop that also does other work).
func ExampleOpenReader() {
	r, err := fanout.OpenReader(fanout.ReaderConfig{
		Path:      fanout.Path("", "239.192.0.1-31001"),
		OnMessage: func(m subscriber.Message) { _ = m.Data },
	})
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	ctx := context.Background()
	for {
		n, err := r.Poll()
		if err != nil {
			log.Fatal(err)
		}
		if n == 0 {
			r.Wait(ctx) // spin, then sleep on the futex until the writer writes
		}
	}
}
