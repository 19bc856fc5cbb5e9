package wire_test

import (
	"errors"
	"fmt"

	"github.com/mdbus/mdbus/wire"
)

// Encode three messages into a packet small enough that the third does not
// fit, then decode what was sent.
func Example() {
	session, err := wire.ParseSession("DEMO")
	if err != nil {
		panic(err)
	}

	// Encode into a caller-owned buffer; a 40-byte payload limit holds
	// the 20-byte header and two small messages.
	buf := make([]byte, 0, 40)
	var enc wire.Encoder
	enc.Reset(buf, session, 1, 40)
	for _, msg := range []string{"hello", "market", "data"} {
		if err := enc.Add([]byte(msg)); errors.Is(err, wire.ErrPacketFull) {
			fmt.Printf("%q does not fit: send %d bytes, start a new packet\n", msg, enc.Len())
			break
		}
	}
	datagram := enc.Bytes()

	// Decode: the messages are sub-slices of datagram.
	p, err := wire.ParsePacket(datagram)
	if err != nil {
		panic(err)
	}
	fmt.Printf("session %q seq %d count %d, %d bytes\n", p.Session.String(), p.Seq, p.Count, p.Len())
	it := p.Messages()
	for {
		msg, seq, ok := it.Next()
		if !ok {
			break
		}
		fmt.Printf("  %d: %s\n", seq, msg)
	}
	fmt.Println("next sequence:", p.Next())
	// Output:
	// "data" does not fit: send 35 bytes, start a new packet
	// session "DEMO" seq 1 count 2, 35 bytes
	//   1: hello
	//   2: market
	// next sequence: 3
}

// A re-request for messages 3 to 12 round-trips through its 20 bytes.
func ExampleParseRequest() {
	session, _ := wire.ParseSession("DEMO")
	b := wire.AppendRequest(nil, wire.Request{Session: session, Seq: 3, Count: 10})
	fmt.Printf("% x\n", b)

	r, err := wire.ParseRequest(b)
	fmt.Println(r.Session, r.Seq, r.Count, err)

	_, err = wire.ParseRequest(b[:19])
	fmt.Println(errors.Is(err, wire.ErrRequestLen))
	// Output:
	// 44 45 4d 4f 20 20 20 20 20 20 00 00 00 00 00 00 00 03 00 0a
	// DEMO 3 10 <nil>
	// true
}
