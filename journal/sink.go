package journal

import (
	"errors"
	"net/netip"
	"sync/atomic"

	"github.com/mdbus/mdbus/wire"
)

// Sink journals the packets a publisher sends (it is a publisher sink:
// SentPacket). A publisher takes its sinks when it is made, before its
// session and source port are known, so the Sink's stream is created
// later, by Start; packets sent before Start are not journaled (a
// publisher offers its sinks data packets only, and Start is called
// before the first message is published).
//
// SentPacket may be called concurrently with Start and End (from the
// publisher's send path); Start and End must not be called concurrently
// with each other.
type Sink struct {
	j *Journal
	w atomic.Pointer[Writer]
}

// NewSink returns a Sink that journals to j. It does not own j: close j
// after End.
func NewSink(j *Journal) *Sink { return &Sink{j: j} }

// Start creates the stream the packets go to: session from source, the
// first record at sequence first (the publication's next sequence).
func (s *Sink) Start(session wire.Session, source netip.AddrPort, first wire.Seq) error {
	w, err := s.j.Create(session, source, first)
	if err != nil {
		return err
	}
	s.w.Store(w)
	return nil
}

// SentPacket journals the messages of the MoldUDP64 data packet pkt,
// stamped with the current time. It does not keep pkt. A failed append is
// latched in the writer and returned by End.
func (s *Sink) SentPacket(pkt []byte) {
	if w := s.w.Load(); w != nil {
		w.SentPacket(pkt)
	}
}

// End records the end of session (next is the sequence after the last
// one published) and closes the stream's writer, once the publisher is
// closed and sends nothing more. It returns the first append error the
// writer latched, if any, with any error of the end and close. Without a
// Start it does nothing.
func (s *Sink) End(next wire.Seq) error {
	w := s.w.Load()
	if w == nil {
		return nil
	}
	return errors.Join(w.Err(), w.End(next), w.Close())
}
