package wire

// RequestLen is the size of a re-request. Part of the wire format; do not change.
const RequestLen = HeaderLen

// Request is a re-request: the client asks for Count messages of Session
// starting at Seq.
type Request struct {
	Session Session
	Seq     Seq
	Count   uint16
}

// AppendRequest appends the 20-byte encoding of r to b.
func AppendRequest(b []byte, r Request) []byte {
	return AppendHeader(b, Header(r))
}

// ParseRequest decodes and validates a re-request datagram: exactly
// RequestLen bytes, a printable session, a sequence other than 0, a count
// from 1 to MaxCount, and a range that does not overflow.
func ParseRequest(b []byte) (Request, error) {
	if len(b) != RequestLen {
		return Request{}, ErrRequestLen
	}
	h, _ := ParseHeader(b) // length checked above
	r := Request(h)
	switch {
	case !r.Session.Valid():
		return Request{}, ErrBadSession
	case r.Seq == InvalidSeq:
		return Request{}, ErrZeroSeq
	case r.Count == 0 || r.Count == CountEndOfSession:
		return Request{}, ErrZeroCount
	case uint64(r.Seq)+uint64(r.Count) < uint64(r.Seq):
		return Request{}, ErrSeqOverflow
	}
	return r, nil
}

// Length is the encoded size of r.
func (r Request) Length() int { return RequestLen }
