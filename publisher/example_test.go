package publisher_test

import (
	"context"
	"fmt"
	"log"
	"net/netip"
	"sync"

	"github.com/mdbus/mdbus/publisher"
)

// countingSink stands for a retransmit cache or a journal.
type countingSink struct {
	mu      sync.Mutex
	packets int
}

func (s *countingSink) SentPacket(pkt []byte) {
	s.mu.Lock()
	s.packets++ // a real cache copies pkt: it is valid only during the call
	s.mu.Unlock()
}

// Publishing to a group on the loopback interface, where packets stay on
// this host (TTL 0). The example compiles but does not run: it would send.
func Example() {
	cache := &countingSink{}
	p, err := publisher.New(publisher.Config{
		Group:   netip.MustParseAddrPort("239.1.1.1:30001"),
		Session: "FEED1",
		Sinks:   []publisher.Sink{cache},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close() // flushes, then sends the end of session

	seq, err := p.Publish([]byte("hello"))
	if err != nil {
		log.Fatal(err)
	}
	first, err := p.PublishBatch([][]byte{[]byte("a"), []byte("b")})
	if err != nil {
		log.Fatal(err)
	}
	if err := p.Flush(context.Background()); err != nil {
		log.Fatal(err)
	}
	fmt.Println(seq, first, p.NextSeq(), p.Stats().Messages)
}
