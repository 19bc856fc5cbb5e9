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
// The types, their names here and their lengths (type byte included):
//
//	S system_event 12                  A add_order 36
//	R stock_directory 39               F add_order_mpid 40
//	H stock_trading_action 25          E order_executed 31
//	Y reg_sho_restriction 20           C order_executed_with_price 36
//	L market_participant_position 26   X order_cancel 23
//	V mwcb_decline_level 35            D order_delete 19
//	W mwcb_status 12                   U order_replace 35
//	K ipo_quoting_period_update 28     P trade (non-cross) 44
//	J luld_auction_collar 35           Q cross_trade 40
//	h operational_halt 21              B broken_trade 19
//	I net_order_imbalance_indicator 50
//	N retail_price_improvement_indicator 20
//	O direct_listing_with_capital_raise_price_discovery 48
//
// Fields carry the specification's names in snake_case (stock_locate,
// order_reference_number, buy_sell_indicator, ...), in wire order.
//
// Values are written as the specification defines them: Price(4) with 4
// implied decimals (1234500 is 123.4500), Price(8) (the MWCB levels) with
// 8, timestamps as nanoseconds since midnight followed by the time of day
// (09:30:00.000000123; the 8-byte near execution time of O messages gets
// no time of day when it is beyond a day), the IPO release time as
// seconds since midnight and time of day, alpha fields as characters with
// the padding spaces of fields longer than one byte trimmed (a one-byte
// field keeps its space, which means "not available" in several fields).
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
