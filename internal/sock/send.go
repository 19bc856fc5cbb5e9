package sock

import "io"

// SendAll sends b.Msgs[:n] through c, calling WriteBatch until each
// datagram has left or been refused, and returns the number of WriteBatch
// calls it made.
//
// It is the one rule for every sender of the bus (publisher, retransmit
// server, subscriber re-requests): a datagram the kernel refuses (no route
// to a spoofed requester, a retransmitter's network down) is skipped, and
// the others still leave, because one bad destination must not silence a
// batch. WriteBatch returns how many datagrams left, in order; on an
// error, the one after them is the one refused. SendAll reports it to
// refused and offers the rest again. A call that sends nothing and reports
// no error is taken as refusing its first datagram with io.ErrNoProgress,
// so that SendAll ends after at most n calls whatever the socket does. An
// error that names no datagram of b (all were sent; a wrapper failed on
// datagrams of its own) is reported with m nil.
//
// refused sees each refusal once, with the refused message (valid only
// during the call); it returns whether to go on, false ending SendAll (the
// caller is closing). SendAll moves the unsent messages to the front of
// b.Msgs as it goes, so afterwards the order of b.Msgs[:n] is unspecified.
// It does not allocate when refused does not escape.
func SendAll(c PacketConn, b *Batch, n int, refused func(m *Message, err error) bool) (calls int) {
	n = max(0, min(n, len(b.Msgs)))
	for n > 0 {
		sent, err := c.WriteBatch(b, n)
		calls++
		sent = max(0, min(sent, n))
		if err == nil && sent == 0 {
			err = io.ErrNoProgress
		}
		skip := sent
		if err != nil {
			var m *Message
			if sent < n {
				m = &b.Msgs[sent]
				skip++
			}
			if !refused(m, err) {
				return calls
			}
		}
		copy(b.Msgs, b.Msgs[skip:n])
		n -= skip
	}
	return calls
}
