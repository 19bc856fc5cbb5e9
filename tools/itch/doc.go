// Package itch decodes NASDAQ TotalView-ITCH 5.0 messages for people:
// one line of key=value text or one JSON object per message, field by
// field, as `mdbus sub|replay|journal dump --decode itch50` print them.
//
// It is an application-level package (only cmd/ and tools/ import it):
// the bus itself carries opaque bytes and never looks inside a message.
//
// # Format
//
// The specification is NASDAQ's "Nasdaq TotalView-ITCH 5.0"
// (NQTVITCHspecification.pdf). Every message starts with the same header;
// all integers are unsigned big endian:
//
//	 0      1              3                 5                          11
//	+------+--------------+-----------------+--------------------------+-----------
//	| type | stock locate | tracking number | timestamp (6): ns since  | fields of
//	| (1)  | (2)          | (2)             | midnight                 | the type
//	+------+--------------+-----------------+--------------------------+-----------
//
// The types and their lengths (type byte included) are
//
//	S system event 12            A add order 36                 P trade 44
//	R stock directory 39         F add order with MPID 40       Q cross trade 40
//	H stock trading action 25    E order executed 31            B broken trade 19
//	Y Reg SHO restriction 20     C order executed w/ price 36   I NOII 50
//	L market participant pos. 26 X order cancel 23              N retail interest 20
//	V MWCB decline level 35      D order delete 19              O direct listing with
//	W MWCB status 12             U order replace 35               capital raise 48
//	K IPO quoting period 28      J LULD auction collar 35       h operational halt 21
//
// Values are written as the specification defines them: Price(4) with 4
// implied decimals (1234500 is 123.4500), Price(8) (the MWCB levels) with
// 8, timestamps as nanoseconds since midnight followed by the time of day
// (09:30:00.000000123), the IPO release time as seconds since midnight
// and time of day, alpha fields as characters with the padding spaces of
// fields longer than one byte trimmed (a one-byte field keeps its space,
// which means "not available" in several fields).
//
// # Messages that do not decode
//
// An empty message, an unknown type and a message shorter than its type's
// length are written as their reason, length and bytes in hex (Check
// returns ErrEmpty, ErrUnknownType or ErrShort). Bytes beyond a type's
// length do not stop decoding; they are shown as extra_hex.
//
// # Use
//
//	buf = itch.AppendText(buf[:0], msg) // or AppendJSON
//	buf = append(buf, '\n')
//	w.Write(buf)
//
// Neither encoder allocates when the buffer has room, and both accept any
// input without panicking (FuzzAppend).
package itch
