package main

import (
	"flag"
	"unicode/utf8"

	"github.com/mdbus/mdbus/tools/itch"
)

// decodeUsage is the --decode flag's help, shared by sub, replay and
// journal dump.
const decodeUsage = "decode each message: itch50 (NASDAQ TotalView-ITCH 5.0, field by field: prices as decimals, timestamps in ns since midnight and as time of day; unknown or short messages as hex with the reason); default: none"

// decoder writes a message payload for people: as text (one line, no
// newline) and as a JSON value. The zero decoder writes printable text as
// is and anything else as hex, and a JSON string of hex.
type decoder struct{ itch bool }

func addDecodeFlag(fs *flag.FlagSet) *string { return fs.String("decode", "", decodeUsage) }

// parseOutput checks --format (text, hex or json) and --decode against
// it.
func parseOutput(format, decodeAs string) (decoder, error) {
	if format != "text" && format != "hex" && format != "json" {
		return decoder{}, usageErr("--format %q: want text, hex or json", format)
	}
	return parseDecode(decodeAs, format)
}

// parseDecode checks --decode against the output format: a decoded
// message is text or JSON, never hex.
func parseDecode(v, format string) (decoder, error) {
	switch v {
	case "", "none":
		return decoder{}, nil
	case "itch50", "itch":
		if format == "hex" {
			return decoder{}, usageErr("--decode %s writes text or json, not hex", v)
		}
		return decoder{itch: true}, nil
	}
	return decoder{}, usageErr("--decode %q: want itch50 (NASDAQ TotalView-ITCH 5.0) or none", v)
}

// appendText appends the payload as one line of text.
func (d decoder) appendText(dst, msg []byte) []byte {
	if d.itch {
		return itch.AppendText(dst, msg)
	}
	if utf8.Valid(msg) && printable(msg) {
		return append(dst, msg...)
	}
	return appendHex(dst, msg)
}

// appendJSONField appends `,"KEY":VALUE` for the payload: "itch" and the
// decoded object, or "hexKey" and a hex string.
func (d decoder) appendJSONField(dst, msg []byte, hexKey string) []byte {
	if d.itch {
		dst = append(dst, `,"itch":`...)
		return itch.AppendJSON(dst, msg)
	}
	dst = append(dst, `,"`...)
	dst = append(dst, hexKey...)
	dst = append(dst, `":"`...)
	dst = appendHex(dst, msg)
	return append(dst, '"')
}

func appendHex(dst, b []byte) []byte {
	const digits = "0123456789abcdef"
	for _, c := range b {
		dst = append(dst, digits[c>>4], digits[c&15])
	}
	return dst
}

// appendJSONStr appends s as a JSON string; a byte outside printable
// ASCII becomes \u00XX (session names come off the wire).
func appendJSONStr(dst []byte, s string) []byte {
	const digits = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c < ' ' || c >= 0x7f:
			dst = append(dst, '\\', 'u', '0', '0', digits[c>>4], digits[c&15])
		default:
			dst = append(dst, c)
		}
	}
	return append(dst, '"')
}

// printable reports whether b holds no control character but tab.
func printable(b []byte) bool {
	for _, c := range b {
		if c < 0x20 && c != '\t' {
			return false
		}
	}
	return true
}
