package itch

import "errors"

// Errors Check returns. They say why a message is shown as hex.
var (
	ErrEmpty       = errors.New("itch: empty message")
	ErrUnknownType = errors.New("itch: unknown message type")
	ErrShort       = errors.New("itch: message shorter than its type's length")
)

// HeaderLen is the length of the fields every message starts with: type
// (1), stock locate (2), tracking number (2), timestamp (6).
const HeaderLen = 11

// kind is how a field's bytes are read and written.
type kind uint8

const (
	kindInt     kind = iota // unsigned big-endian integer of 2, 4 or 8 bytes
	kindAlpha               // ASCII, left-justified and space-padded: right-trimmed when longer than 1 byte
	kindPrice4              // Price(4): unsigned, 4 implied decimal places
	kindPrice8              // Price(8): unsigned, 8 implied decimal places
	kindTime6               // Timestamp (6): nanoseconds since midnight
	kindTime8               // Timestamp (8): nanoseconds since midnight
	kindSeconds             // Integer (4): seconds since midnight
)

// field is one field of a message layout; offsets follow from the order.
type field struct {
	name string
	kind kind
	size int
	day  string // time fields: the key of the time of day written beside the number
}

// layout is one message type of the specification.
type layout struct {
	typ    byte
	name   string
	length int // bytes, type byte included
	fields []field
}

// header is the start of every message after the type byte.
var header = []field{
	{name: "stock_locate", kind: kindInt, size: 2},
	{name: "tracking_number", kind: kindInt, size: 2},
	{name: "timestamp", kind: kindTime6, size: 6, day: "time_of_day"},
}

func f(name string, k kind, size int) field { return field{name: name, kind: k, size: size} }

var (
	stock = f("stock", kindAlpha, 8)
	side  = f("buy_sell_indicator", kindAlpha, 1)
	ref   = f("order_reference_number", kindInt, 8)
	match = f("match_number", kindInt, 8)
)

// layouts lists every message of NASDAQ TotalView-ITCH 5.0 (section 1.x of
// the specification), fields in wire order after the header. Part of the
// format; a test checks each length against the sum of its fields.
var layouts = []layout{
	{'S', "system_event", 12, []field{f("event_code", kindAlpha, 1)}},
	{'R', "stock_directory", 39, []field{stock,
		f("market_category", kindAlpha, 1), f("financial_status_indicator", kindAlpha, 1),
		f("round_lot_size", kindInt, 4), f("round_lots_only", kindAlpha, 1),
		f("issue_classification", kindAlpha, 1), f("issue_sub_type", kindAlpha, 2),
		f("authenticity", kindAlpha, 1), f("short_sale_threshold_indicator", kindAlpha, 1),
		f("ipo_flag", kindAlpha, 1), f("luld_reference_price_tier", kindAlpha, 1),
		f("etp_flag", kindAlpha, 1), f("etp_leverage_factor", kindInt, 4),
		f("inverse_indicator", kindAlpha, 1)}},
	{'H', "stock_trading_action", 25, []field{stock,
		f("trading_state", kindAlpha, 1), f("reserved", kindAlpha, 1), f("reason", kindAlpha, 4)}},
	{'Y', "reg_sho_restriction", 20, []field{stock, f("reg_sho_action", kindAlpha, 1)}},
	{'L', "market_participant_position", 26, []field{f("mpid", kindAlpha, 4), stock,
		f("primary_market_maker", kindAlpha, 1), f("market_maker_mode", kindAlpha, 1),
		f("market_participant_state", kindAlpha, 1)}},
	{'V', "mwcb_decline_level", 35, []field{f("level_1", kindPrice8, 8), f("level_2", kindPrice8, 8), f("level_3", kindPrice8, 8)}},
	{'W', "mwcb_status", 12, []field{f("breached_level", kindAlpha, 1)}},
	{'K', "ipo_quoting_period_update", 28, []field{stock,
		{name: "ipo_quotation_release_time", kind: kindSeconds, size: 4, day: "ipo_quotation_release_time_of_day"},
		f("ipo_quotation_release_qualifier", kindAlpha, 1), f("ipo_price", kindPrice4, 4)}},
	{'J', "luld_auction_collar", 35, []field{stock,
		f("auction_collar_reference_price", kindPrice4, 4), f("upper_auction_collar_price", kindPrice4, 4),
		f("lower_auction_collar_price", kindPrice4, 4), f("auction_collar_extension", kindInt, 4)}},
	{'h', "operational_halt", 21, []field{stock, f("market_code", kindAlpha, 1), f("operational_halt_action", kindAlpha, 1)}},
	{'A', "add_order", 36, []field{ref, side, f("shares", kindInt, 4), stock, f("price", kindPrice4, 4)}},
	{'F', "add_order_mpid", 40, []field{ref, side, f("shares", kindInt, 4), stock, f("price", kindPrice4, 4), f("attribution", kindAlpha, 4)}},
	{'E', "order_executed", 31, []field{ref, f("executed_shares", kindInt, 4), match}},
	{'C', "order_executed_with_price", 36, []field{ref, f("executed_shares", kindInt, 4), match,
		f("printable", kindAlpha, 1), f("execution_price", kindPrice4, 4)}},
	{'X', "order_cancel", 23, []field{ref, f("cancelled_shares", kindInt, 4)}},
	{'D', "order_delete", 19, []field{ref}},
	{'U', "order_replace", 35, []field{f("original_order_reference_number", kindInt, 8), f("new_order_reference_number", kindInt, 8),
		f("shares", kindInt, 4), f("price", kindPrice4, 4)}},
	{'P', "trade", 44, []field{ref, side, f("shares", kindInt, 4), stock, f("price", kindPrice4, 4), match}},
	{'Q', "cross_trade", 40, []field{f("shares", kindInt, 8), stock, f("cross_price", kindPrice4, 4), match, f("cross_type", kindAlpha, 1)}},
	{'B', "broken_trade", 19, []field{match}},
	{'I', "net_order_imbalance_indicator", 50, []field{f("paired_shares", kindInt, 8), f("imbalance_shares", kindInt, 8),
		f("imbalance_direction", kindAlpha, 1), stock, f("far_price", kindPrice4, 4), f("near_price", kindPrice4, 4),
		f("current_reference_price", kindPrice4, 4), f("cross_type", kindAlpha, 1), f("price_variation_indicator", kindAlpha, 1)}},
	{'N', "retail_price_improvement_indicator", 20, []field{stock, f("interest_flag", kindAlpha, 1)}},
	{'O', "direct_listing_with_capital_raise_price_discovery", 48, []field{stock, f("open_eligibility_status", kindAlpha, 1),
		f("minimum_allowable_price", kindPrice4, 4), f("maximum_allowable_price", kindPrice4, 4),
		f("near_execution_price", kindPrice4, 4),
		{name: "near_execution_time", kind: kindTime8, size: 8, day: "near_execution_time_of_day"},
		f("lower_price_range_collar", kindPrice4, 4), f("upper_price_range_collar", kindPrice4, 4)}},
}

// byType indexes layouts by their type byte.
var byType [256]*layout

func init() {
	for i := range layouts {
		byType[layouts[i].typ] = &layouts[i]
	}
}

// Types returns the message types of the specification, in its order.
func Types() []byte {
	out := make([]byte, len(layouts))
	for i, l := range layouts {
		out[i] = l.typ
	}
	return out
}

// Length returns the length in bytes (type byte included) of messages of
// type t, or 0 when t is not a type of ITCH 5.0.
func Length(t byte) int {
	if l := byType[t]; l != nil {
		return l.length
	}
	return 0
}

// Name returns the snake_case name of message type t ("add_order"), or ""
// when t is not a type of ITCH 5.0.
func Name(t byte) string {
	if l := byType[t]; l != nil {
		return l.name
	}
	return ""
}

// Check reports whether msg decodes: nil, ErrEmpty, ErrUnknownType or
// ErrShort. Bytes beyond the type's length do not stop decoding; the
// encoders show them as hex.
func Check(msg []byte) error {
	if len(msg) == 0 {
		return ErrEmpty
	}
	l := byType[msg[0]]
	if l == nil {
		return ErrUnknownType
	}
	if len(msg) < l.length {
		return ErrShort
	}
	return nil
}

// Timestamp returns the message's timestamp in nanoseconds since midnight
// (bytes 5-10), and false when msg is shorter than the header.
func Timestamp(msg []byte) (uint64, bool) {
	if len(msg) < HeaderLen {
		return 0, false
	}
	return be(msg[5:11]), true
}

// be reads an unsigned big-endian integer of up to 8 bytes.
func be(b []byte) uint64 {
	var v uint64
	for _, c := range b {
		v = v<<8 | uint64(c)
	}
	return v
}
