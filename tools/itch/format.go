package itch

import "strconv"

// AppendText appends msg decoded as one line of space-separated key=value
// pairs (no newline) to dst and returns the extended buffer. The line
// starts with the type character and the message name:
//
//	A add_order stock_locate=2 tracking_number=0 timestamp=34200017000000 time_of_day=09:30:00.017000000 order_reference_number=... buy_sell_indicator=B shares=100 stock=AAPL price=291.5200
//
// Alpha values that are empty or hold a space, a quote, a backslash, '='
// or a byte outside printable ASCII are double-quoted, with \" \\ and \xNN
// escapes. A message that does not decode (see Check) is written as
// "! error=REASON len=N hex=HEX". It does not allocate when dst has room.
func AppendText(dst, msg []byte) []byte { return appendMsg(dst, msg, false) }

// AppendJSON appends msg decoded as one JSON object (no newline) to dst and
// returns the extended buffer: "type" and "name", then every field of the
// specification under its snake_case name. Integers and prices are JSON
// numbers (prices with exactly 4, or 8 for Price(8), decimals), alpha
// fields strings, and each time field is followed by its time of day as a
// string. A message that does not decode has "error", "len" and "hex"
// (with "type" and "name" where known). It does not allocate when dst has
// room.
func AppendJSON(dst, msg []byte) []byte { return appendMsg(dst, msg, true) }

func appendMsg(dst, msg []byte, js bool) []byte {
	if js {
		dst = append(dst, '{')
	}
	if err := Check(msg); err != nil {
		return appendBad(dst, msg, err, js)
	}
	l := byType[msg[0]]
	if js {
		dst = append(dst, `"type":`...)
		dst = appendJSONString(dst, msg[:1])
		dst = append(dst, `,"name":"`...)
		dst = append(dst, l.name...)
		dst = append(dst, '"')
	} else {
		dst = appendTextString(dst, msg[:1])
		dst = append(dst, ' ')
		dst = append(dst, l.name...)
	}
	off := 1
	for _, fl := range header {
		dst = appendField(dst, fl, msg[off:off+fl.size], js)
		off += fl.size
	}
	for _, fl := range l.fields {
		dst = appendField(dst, fl, msg[off:off+fl.size], js)
		off += fl.size
	}
	if len(msg) > l.length {
		dst = appendKey(dst, "extra_hex", js)
		dst = appendHex(dst, msg[l.length:], js)
	}
	if js {
		dst = append(dst, '}')
	}
	return dst
}

// appendBad writes a message that does not decode: the reason, its length
// and its bytes as hex.
func appendBad(dst, msg []byte, err error, js bool) []byte {
	if js {
		dst = append(dst, `"error":"`...)
	} else {
		dst = append(dst, `! error="`...)
	}
	switch err {
	case ErrEmpty:
		dst = append(dst, "empty message"...)
	case ErrUnknownType:
		dst = append(dst, "unknown message type 0x"...)
		dst = appendHexByte(dst, msg[0])
	case ErrShort:
		l := byType[msg[0]]
		dst = append(dst, l.name...)
		dst = append(dst, " short: "...)
		dst = strconv.AppendInt(dst, int64(len(msg)), 10)
		dst = append(dst, " bytes, want "...)
		dst = strconv.AppendInt(dst, int64(l.length), 10)
	}
	dst = append(dst, '"')
	if js && len(msg) > 0 {
		dst = append(dst, `,"type":`...)
		dst = appendJSONString(dst, msg[:1])
		if l := byType[msg[0]]; l != nil {
			dst = append(dst, `,"name":"`...)
			dst = append(dst, l.name...)
			dst = append(dst, '"')
		}
	}
	dst = appendKey(dst, "len", js)
	dst = strconv.AppendInt(dst, int64(len(msg)), 10)
	dst = appendKey(dst, "hex", js)
	dst = appendHex(dst, msg, js)
	if js {
		dst = append(dst, '}')
	}
	return dst
}

func appendKey(dst []byte, name string, js bool) []byte {
	if js {
		dst = append(dst, ',', '"')
		dst = append(dst, name...)
		return append(dst, '"', ':')
	}
	dst = append(dst, ' ')
	dst = append(dst, name...)
	return append(dst, '=')
}

func appendField(dst []byte, fl field, b []byte, js bool) []byte {
	dst = appendKey(dst, fl.name, js)
	switch fl.kind {
	case kindInt:
		return strconv.AppendUint(dst, be(b), 10)
	case kindPrice4:
		return appendDecimal(dst, be(b), 4)
	case kindPrice8:
		return appendDecimal(dst, be(b), 8)
	case kindAlpha:
		if len(b) > 1 {
			b = trimRight(b)
		}
		if js {
			return appendJSONString(dst, b)
		}
		return appendTextString(dst, b)
	}
	// Time fields: the number, then the time of day. An 8-byte time
	// beyond a day is not a time of day: the number alone.
	v := be(b)
	dst = strconv.AppendUint(dst, v, 10)
	if fl.kind == kindTime8 && v >= 24*3600*1e9 {
		return dst
	}
	dst = appendKey(dst, fl.day, js)
	if js {
		dst = append(dst, '"')
	}
	if fl.kind == kindSeconds {
		dst = appendClock(dst, v, false)
	} else {
		dst = appendClock(dst, v, true)
	}
	if js {
		dst = append(dst, '"')
	}
	return dst
}

func trimRight(b []byte) []byte {
	for len(b) > 0 && b[len(b)-1] == ' ' {
		b = b[:len(b)-1]
	}
	return b
}

// appendDecimal writes v with dec implied decimal places: 1234500, 4 ->
// 123.4500.
func appendDecimal(dst []byte, v uint64, dec int) []byte {
	p := uint64(1)
	for range dec {
		p *= 10
	}
	dst = strconv.AppendUint(dst, v/p, 10)
	dst = append(dst, '.')
	frac := v % p
	for d := p / 10; d > 0; d /= 10 {
		dst = append(dst, byte('0'+frac/d%10))
	}
	return dst
}

// appendClock writes a time since midnight as HH:MM:SS, with nine
// decimals of seconds when v is in nanoseconds (frac), else v is seconds.
// Hours count on past 23 for values beyond a day, as the field allows.
func appendClock(dst []byte, v uint64, frac bool) []byte {
	ns := uint64(0)
	if frac {
		v, ns = v/1e9, v%1e9
	}
	h, m, s := v/3600, v/60%60, v%60
	if h < 10 {
		dst = append(dst, '0')
	}
	dst = strconv.AppendUint(dst, h, 10)
	dst = append(dst, ':', byte('0'+m/10), byte('0'+m%10), ':', byte('0'+s/10), byte('0'+s%10))
	if frac {
		dst = append(dst, '.')
		for d := uint64(1e8); d > 0; d /= 10 {
			dst = append(dst, byte('0'+ns/d%10))
		}
	}
	return dst
}

const hexDigits = "0123456789abcdef"

func appendHexByte(dst []byte, c byte) []byte {
	return append(dst, hexDigits[c>>4], hexDigits[c&15])
}

func appendHex(dst, b []byte, js bool) []byte {
	if js {
		dst = append(dst, '"')
	}
	for _, c := range b {
		dst = appendHexByte(dst, c)
	}
	if js {
		dst = append(dst, '"')
	}
	return dst
}

// appendTextString writes b bare when it is a non-empty run of printable
// ASCII without '"', '\\' or '=', else double-quoted with escapes.
func appendTextString(dst, b []byte) []byte {
	bare := len(b) > 0
	for _, c := range b {
		if c <= ' ' || c >= 0x7f || c == '"' || c == '\\' || c == '=' {
			bare = false
			break
		}
	}
	if bare {
		return append(dst, b...)
	}
	return appendQuoted(dst, b, `\x`)
}

// appendJSONString writes b as a JSON string; a byte outside printable
// ASCII becomes \u00XX (the byte's value: ITCH alpha fields are ASCII).
func appendJSONString(dst, b []byte) []byte { return appendQuoted(dst, b, `\u00`) }

// appendQuoted writes b double-quoted, '"' and '\\' escaped with a
// backslash, and a byte outside printable ASCII as esc and its two hex
// digits.
func appendQuoted(dst, b []byte, esc string) []byte {
	dst = append(dst, '"')
	for _, c := range b {
		switch {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c < ' ' || c >= 0x7f:
			dst = append(dst, esc...)
			dst = appendHexByte(dst, c)
		default:
			dst = append(dst, c)
		}
	}
	return append(dst, '"')
}
