// Package validpkt hands a MoldUDP64 packet from the code in this module
// that encoded it to a consumer in this module that would otherwise
// validate it again.
//
// A publisher's sinks get each packet it sends (publisher.Sink). A sink
// that gets bytes must walk every message's length prefix before it may
// rely on them (wire.ParsePacket): at one packet of 22 messages every
// 2 µs, that walk was 4.6% of a publishing process's CPU with a
// retransmit.Cache as its sink, for packets its own encoder had just
// written. Packet carries the header fields beside the message blocks
// instead. Because this package is internal, no code outside the module
// can make a Packet, so a method that takes one (retransmit's
// Cache.SentValidPacket) can only be handed packets that this module's
// own encoder produced; everything else goes through the validating path.
package validpkt

import "github.com/mdbus/mdbus/wire"

// Packet is a downstream data packet as its encoder wrote it: Count
// messages, the first numbered Seq, whose length-prefixed blocks fill
// Body exactly. The zero Packet carries no message.
type Packet struct {
	Session wire.Session
	Seq     wire.Seq
	Count   uint16
	Body    []byte // the message blocks, header excluded
}

// Sink is what a publisher's sink implements to be handed its packets as
// Packets instead of bytes (publisher.Sink.SentPacket); the rules of
// SentPacket hold (same goroutine, valid only during the call).
type Sink interface {
	SentValidPacket(p Packet)
}
