package itch_test

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mdbus/mdbus/tools/itch"
)

// sample reads testdata/nasdaq-itch50-1000-messages.bin: the first 1000
// messages of NASDAQ's public 2019-12-30 ITCH 5.0 sample, each after a
// 2-byte big-endian length (shared/testdata/README.md).
func sample(t testing.TB) [][]byte {
	t.Helper()
	d, err := os.ReadFile("testdata/nasdaq-itch50-1000-messages.bin")
	require.NoError(t, err)
	var out [][]byte
	for len(d) > 0 {
		require.GreaterOrEqual(t, len(d), 2)
		n := int(binary.BigEndian.Uint16(d))
		require.GreaterOrEqual(t, len(d), 2+n)
		out = append(out, d[2:2+n])
		d = d[2+n:]
	}
	require.Len(t, out, 1000)
	return out
}

func TestTypesOfTheSpecification(t *testing.T) {
	// Section 1 of the specification, in its order.
	require.Equal(t, "SRHYLVWKJhAFECXDUPQBINO", string(itch.Types()))
	want := map[byte]int{'S': 12, 'R': 39, 'H': 25, 'Y': 20, 'L': 26, 'V': 35, 'W': 12, 'K': 28, 'J': 35, 'h': 21,
		'A': 36, 'F': 40, 'E': 31, 'C': 36, 'X': 23, 'D': 19, 'U': 35, 'P': 44, 'Q': 40, 'B': 19, 'I': 50, 'N': 20, 'O': 48}
	for _, typ := range itch.Types() {
		require.Equal(t, want[typ], itch.Length(typ), "length of %c", typ)
		require.NotEmpty(t, itch.Name(typ))
		// The fields written add up to the length: a message of exactly
		// that length decodes, one byte less is short.
		msg := make([]byte, want[typ])
		msg[0] = typ
		require.NoError(t, itch.Check(msg))
		require.ErrorIs(t, itch.Check(msg[:len(msg)-1]), itch.ErrShort)
		require.NotContains(t, string(itch.AppendText(nil, msg)), "extra_hex")
	}
	require.Zero(t, itch.Length('Z'))
	require.Empty(t, itch.Name('Z'))
}

// TestSampleEveryMessage decodes all 1000 real messages: each is exactly
// its type's length, decodes, and its JSON is valid with the type's fields.
func TestSampleEveryMessage(t *testing.T) {
	counts := map[byte]int{}
	for i, m := range sample(t) {
		require.NoError(t, itch.Check(m), "message %d", i+1)
		require.Equal(t, itch.Length(m[0]), len(m), "message %d", i+1)
		counts[m[0]]++
		var obj map[string]any
		require.NoError(t, json.Unmarshal(itch.AppendJSON(nil, m), &obj), "message %d: %s", i+1, itch.AppendJSON(nil, m))
		require.Equal(t, string(m[:1]), obj["type"])
		require.NotContains(t, obj, "error")
		txt := string(itch.AppendText(nil, m))
		require.True(t, strings.HasPrefix(txt, string(m[:1])+" "+itch.Name(m[0])+" stock_locate="), txt)
		require.NotContains(t, txt, "\n")
	}
	require.Equal(t, map[byte]int{'A': 367, 'U': 225, 'F': 193, 'D': 167, 'E': 28, 'X': 6, 'I': 4, 'P': 4, 'Q': 4, 'S': 1, 'C': 1}, counts)
}

// TestSampleHandChecked compares the first message of every type in the
// sample with values decoded by hand from its bytes (hex in the comments;
// header = type, locate, tracking, timestamp).
func TestSampleHandChecked(t *testing.T) {
	msgs := sample(t)
	cases := []struct {
		index int // 1-based position in the sample
		text  string
	}{
		// 44 | 0be1 | 0000 | 1f1aced9f0e6 | 00000000004a07ee
		// D, locate 0x0be1=3041, tracking 0, ts 0x1f1aced9f0e6 = 34200000000230 ns
		// = 9 h 30 min 0.000000230 s, order ref 0x4a07ee = 4851694.
		{1, "D order_delete stock_locate=3041 tracking_number=0 timestamp=34200000000230 time_of_day=09:30:00.000000230 order_reference_number=4851694"},
		// 45 | 06bb | 0002 | 1f1aced9fac8 | 000000000077de35 | 00000050 | 000000000000d0e6
		// E, locate 1723, tracking 2, ts +0xac8-0x0e6 = 2530 ns later = ...2760,
		// order ref 0x77de35 = 7855669, executed 0x50 = 80, match 0xd0e6 = 53478.
		{2, "E order_executed stock_locate=1723 tracking_number=2 timestamp=34200000002760 time_of_day=09:30:00.000002760 order_reference_number=7855669 executed_shares=80 match_number=53478"},
		// 53 | 0000 | 0000 | 1f1acedb172e | 51
		// S, ts 0x1f1acedb172e = 34200000075566, event code 0x51 'Q' (start of market hours).
		{3, "S system_event stock_locate=0 tracking_number=0 timestamp=34200000075566 time_of_day=09:30:00.000075566 event_code=Q"},
		// 55 | 1154 | 0000 | 1f1acedb5554 | 0000000000554672 | 0000000000569e5a | 000003e8 | 001c758c
		// U, locate 0x1154=4436, original ref 0x554672=5588594, new ref 0x569e5a=5676634,
		// shares 0x3e8=1000, price 0x1c758c=1865100 -> 186.5100.
		{5, "U order_replace stock_locate=4436 tracking_number=0 timestamp=34200000091476 time_of_day=09:30:00.000091476 original_order_reference_number=5588594 new_order_reference_number=5676634 shares=1000 price=186.5100"},
		// 41 | 20bd | 0000 | 1f1acedb597b | 0000000000970c7c | 42 | 00000064 | 5649584d20202020 | 00034134
		// A, locate 0x20bd=8381, ref 0x970c7c=9899132, 'B', 100 shares,
		// "VIXM    " trimmed, price 0x34134=213300 -> 21.3300.
		{6, "A add_order stock_locate=8381 tracking_number=0 timestamp=34200000092539 time_of_day=09:30:00.000092539 order_reference_number=9899132 buy_sell_indicator=B shares=100 stock=VIXM price=21.3300"},
		// 46 | 1804 | 0000 | 1f1acedb6963 | 0000000000729047 | 42 | 00000064 | 5047462020202020 | 0002cad8 | 464c5447
		// F, locate 0x1804=6148, ref 0x729047=7508039, 'B', 100, "PGF", price
		// 0x2cad8=183000 -> 18.3000, attribution "FLTG".
		{8, "F add_order_mpid stock_locate=6148 tracking_number=0 timestamp=34200000096611 time_of_day=09:30:00.000096611 order_reference_number=7508039 buy_sell_indicator=B shares=100 stock=PGF price=18.3000 attribution=FLTG"},
		// 49 | 02cc | 0000 | 1f1acedbc7ec | 000000000000004f | 0000000000000000 | 4e | 424154524b202020 |
		// 0004856c | 0004856c | 0004856c | 4f | 4c
		// I, locate 716, paired 0x4f=79, imbalance 0, direction 'N', "BATRK",
		// far/near/reference 0x4856c=296300 -> 29.6300, cross 'O', variation 'L'.
		{25, "I net_order_imbalance_indicator stock_locate=716 tracking_number=0 timestamp=34200000120812 time_of_day=09:30:00.000120812 paired_shares=79 imbalance_shares=0 imbalance_direction=N stock=BATRK far_price=29.6300 near_price=29.6300 current_reference_price=29.6300 cross_type=O price_variation_indicator=L"},
		// 50 | 1a9f | 0002 | 1f1acee49393 | 0000000000000000 | 42 | 00000054 | 524f4b5520202020 | 001502e8 | 000000000000d0ef
		// P, locate 0x1a9f=6815, ref 0 (trades of hidden orders carry none), 'B',
		// 0x54=84, "ROKU", 0x1502e8=1377000 -> 137.7000, match 0xd0ef=53487.
		{263, "P trade stock_locate=6815 tracking_number=2 timestamp=34200000697235 time_of_day=09:30:00.000697235 order_reference_number=0 buy_sell_indicator=B shares=84 stock=ROKU price=137.7000 match_number=53487"},
		// 43 | 0e58 | 0001 | 1f1acee91efc | 000000000056961a | 00000036 | 000000000000d0f8 | 4e | 00062b4c
		// C, locate 0x0e58=3672, ref 0x56961a=5674522, executed 0x36=54, match
		// 0xd0f8=53496, printable 'N', price 0x62b4c=404300 -> 40.4300.
		{308, "C order_executed_with_price stock_locate=3672 tracking_number=1 timestamp=34200000995068 time_of_day=09:30:00.000995068 order_reference_number=5674522 executed_shares=54 match_number=53496 printable=N execution_price=40.4300"},
		// 51 | 0e58 | 0002 | 1f1acee91efc | 0000000000001829 | 4844532020202020 | 00062b4c | 000000000000d0f9 | 4f
		// Q, shares (8 bytes) 0x1829=6185, "HDS", 40.4300, match 0xd0f9=53497, cross 'O'.
		{309, "Q cross_trade stock_locate=3672 tracking_number=2 timestamp=34200000995068 time_of_day=09:30:00.000995068 shares=6185 stock=HDS cross_price=40.4300 match_number=53497 cross_type=O"},
		// 58 | 025a | 0000 | 1f1aceecdb0c | 000000000077aefd | 000000c8
		// X, locate 0x25a=602, ref 0x77aefd=7843581, cancelled 0xc8=200.
		{485, "X order_cancel stock_locate=602 tracking_number=0 timestamp=34200001239820 time_of_day=09:30:00.001239820 order_reference_number=7843581 cancelled_shares=200"},
	}
	for _, c := range cases {
		m := msgs[c.index-1]
		t.Run(itch.Name(m[0]), func(t *testing.T) {
			require.Equal(t, c.text, string(itch.AppendText(nil, m)))
			// JSON carries the same values under the same keys, numbers
			// written exactly as in the text.
			js := string(itch.AppendJSON(nil, m))
			var obj map[string]any
			require.NoError(t, json.Unmarshal([]byte(js), &obj))
			for _, kv := range strings.Fields(c.text)[2:] {
				k, v, _ := strings.Cut(kv, "=")
				switch obj[k].(type) {
				case string:
					require.Contains(t, js, `"`+k+`":"`+v+`"`)
				case float64:
					num := `"` + k + `":` + v
					require.True(t, strings.Contains(js, num+",") || strings.HasSuffix(js, num+"}"), "%s in %s", num, js)
				default:
					t.Fatalf("%s: %T", k, obj[k])
				}
			}
		})
	}
}

// TestTypesNotInSample builds the types the sample lacks byte by byte and
// checks every field.
func TestTypesNotInSample(t *testing.T) {
	hdr := "0001" + "0002" + "000000000003" // locate 1, tracking 2, ts 3 ns
	cases := []struct{ hex, text string }{
		{"52" + hdr + "4141504c20202020" + "51" + "4e" + "00000064" + "4e" + "43" + "5a20" + "50" + "4e" + "20" + "31" + "4e" + "00000000" + "4e",
			`R stock_directory stock_locate=1 tracking_number=2 timestamp=3 time_of_day=00:00:00.000000003 stock=AAPL market_category=Q financial_status_indicator=N round_lot_size=100 round_lots_only=N issue_classification=C issue_sub_type=Z authenticity=P short_sale_threshold_indicator=N ipo_flag=" " luld_reference_price_tier=1 etp_flag=N etp_leverage_factor=0 inverse_indicator=N`},
		{"48" + hdr + "4142432020202020" + "48" + "20" + "4c554431",
			`H stock_trading_action stock_locate=1 tracking_number=2 timestamp=3 time_of_day=00:00:00.000000003 stock=ABC trading_state=H reserved=" " reason=LUD1`},
		{"59" + hdr + "4142432020202020" + "31",
			`Y reg_sho_restriction stock_locate=1 tracking_number=2 timestamp=3 time_of_day=00:00:00.000000003 stock=ABC reg_sho_action=1`},
		{"4c" + hdr + "4e495445" + "4142432020202020" + "59" + "4e" + "41",
			`L market_participant_position stock_locate=1 tracking_number=2 timestamp=3 time_of_day=00:00:00.000000003 mpid=NITE stock=ABC primary_market_maker=Y market_maker_mode=N market_participant_state=A`},
		// Price(8): 0x0000001c6a269e00 = 122,040,000,000 -> 1220.40000000.
		{"56" + hdr + "0000001c6a269e00" + "0000000000000001" + "0000000005f5e100",
			`V mwcb_decline_level stock_locate=1 tracking_number=2 timestamp=3 time_of_day=00:00:00.000000003 level_1=1220.40000000 level_2=0.00000001 level_3=1.00000000`},
		{"57" + hdr + "32",
			`W mwcb_status stock_locate=1 tracking_number=2 timestamp=3 time_of_day=00:00:00.000000003 breached_level=2`},
		// Release time 0x0000a8c0 = 43200 s = 12:00:00; IPO price 0x000f4240 = 1000000 -> 100.0000.
		{"4b" + hdr + "49504f2020202020" + "0000a8c0" + "41" + "000f4240",
			`K ipo_quoting_period_update stock_locate=1 tracking_number=2 timestamp=3 time_of_day=00:00:00.000000003 stock=IPO ipo_quotation_release_time=43200 ipo_quotation_release_time_of_day=12:00:00 ipo_quotation_release_qualifier=A ipo_price=100.0000`},
		{"4a" + hdr + "4142432020202020" + "00002710" + "00002af8" + "00002328" + "00000002",
			`J luld_auction_collar stock_locate=1 tracking_number=2 timestamp=3 time_of_day=00:00:00.000000003 stock=ABC auction_collar_reference_price=1.0000 upper_auction_collar_price=1.1000 lower_auction_collar_price=0.9000 auction_collar_extension=2`},
		{"68" + hdr + "4142432020202020" + "51" + "48",
			`h operational_halt stock_locate=1 tracking_number=2 timestamp=3 time_of_day=00:00:00.000000003 stock=ABC market_code=Q operational_halt_action=H`},
		{"42" + hdr + "00000000000004d2",
			`B broken_trade stock_locate=1 tracking_number=2 timestamp=3 time_of_day=00:00:00.000000003 match_number=1234`},
		{"4e" + hdr + "4142432020202020" + "41",
			`N retail_price_improvement_indicator stock_locate=1 tracking_number=2 timestamp=3 time_of_day=00:00:00.000000003 stock=ABC interest_flag=A`},
		// Near execution time (8 bytes) 0x1f1aced9f001 = 34200000000001 ns.
		{"4f" + hdr + "4142432020202020" + "59" + "00002710" + "00004e20" + "00003a98" + "00001f1aced9f001" + "00003200" + "000041a0",
			`O direct_listing_with_capital_raise_price_discovery stock_locate=1 tracking_number=2 timestamp=3 time_of_day=00:00:00.000000003 stock=ABC open_eligibility_status=Y minimum_allowable_price=1.0000 maximum_allowable_price=2.0000 near_execution_price=1.5000 near_execution_time=34200000000001 near_execution_time_of_day=09:30:00.000000001 lower_price_range_collar=1.2800 upper_price_range_collar=1.6800`},
	}
	seen := map[byte]bool{}
	for _, c := range cases {
		m, err := hex.DecodeString(c.hex)
		require.NoError(t, err)
		seen[m[0]] = true
		require.Equal(t, itch.Length(m[0]), len(m), "%c", m[0])
		require.Equal(t, c.text, string(itch.AppendText(nil, m)))
		require.True(t, json.Valid(itch.AppendJSON(nil, m)), "%s", itch.AppendJSON(nil, m))
	}
	for _, typ := range itch.Types() {
		if !strings.ContainsRune("AFEDUPQXCIS", rune(typ)) {
			require.True(t, seen[typ], "no case for %c", typ)
		}
	}
}

func TestJSONValues(t *testing.T) {
	m, _ := hex.DecodeString("56" + "0001" + "0002" + "000000000003" + "0000001c6a269e00" + "0000000000000001" + "0000000005f5e100")
	require.Equal(t, `{"type":"V","name":"mwcb_decline_level","stock_locate":1,"tracking_number":2,"timestamp":3,"time_of_day":"00:00:00.000000003","level_1":1220.40000000,"level_2":0.00000001,"level_3":1.00000000}`,
		string(itch.AppendJSON(nil, m)))
	// An 8-byte near execution time beyond a day has no time of day.
	o, _ := hex.DecodeString("4f" + "0001" + "0002" + "000000000003" + "4142432020202020" + "59" + "00002710" + "00004e20" + "00003a98" +
		"17f0a1b2c3d4e5f6" + "00003200" + "000041a0")
	require.Contains(t, string(itch.AppendJSON(nil, o)), `"near_execution_time":1725056446444660214,"lower_price_range_collar":1.2800`)
	// Alpha bytes that are not printable ASCII are escaped, never raw.
	s, _ := hex.DecodeString("53" + "0000" + "0000" + "000000000000" + "22")
	require.Equal(t, `{"type":"S","name":"system_event","stock_locate":0,"tracking_number":0,"timestamp":0,"time_of_day":"00:00:00.000000000","event_code":"\""}`, string(itch.AppendJSON(nil, s)))
	s[11] = 0x01
	require.Contains(t, string(itch.AppendJSON(nil, s)), `"event_code":"\u0001"`)
	require.Contains(t, string(itch.AppendText(nil, s)), `event_code="\x01"`)
}

func TestDoesNotDecode(t *testing.T) {
	cases := []struct {
		hex, text, json string
		err             error
	}{
		{"", `! error="empty message" len=0 hex=`, `{"error":"empty message","len":0,"hex":""}`, itch.ErrEmpty},
		{"5a0102", `! error="unknown message type 0x5a" len=3 hex=5a0102`, `{"error":"unknown message type 0x5a","type":"Z","len":3,"hex":"5a0102"}`, itch.ErrUnknownType},
		{"ff", `! error="unknown message type 0xff" len=1 hex=ff`, `{"error":"unknown message type 0xff","type":"\u00ff","len":1,"hex":"ff"}`, itch.ErrUnknownType},
		{"44000100020000000000030000", `! error="order_delete short: 13 bytes, want 19" len=13 hex=44000100020000000000030000`,
			`{"error":"order_delete short: 13 bytes, want 19","type":"D","name":"order_delete","len":13,"hex":"44000100020000000000030000"}`, itch.ErrShort},
	}
	for _, c := range cases {
		m, _ := hex.DecodeString(c.hex)
		require.ErrorIs(t, itch.Check(m), c.err)
		require.Equal(t, c.text, string(itch.AppendText(nil, m)))
		require.Equal(t, c.json, string(itch.AppendJSON(nil, m)))
		require.True(t, json.Valid([]byte(c.json)))
	}
	// Bytes beyond the type's length: decoded, the rest shown.
	m, _ := hex.DecodeString("440001000200000000000300000000000000070a0b")
	require.NoError(t, itch.Check(m))
	require.Equal(t, "D order_delete stock_locate=1 tracking_number=2 timestamp=3 time_of_day=00:00:00.000000003 order_reference_number=7 extra_hex=0a0b", string(itch.AppendText(nil, m)))
	require.Contains(t, string(itch.AppendJSON(nil, m)), `,"extra_hex":"0a0b"}`)
	ts, ok := itch.Timestamp(m)
	require.True(t, ok)
	require.Equal(t, uint64(3), ts)
	_, ok = itch.Timestamp(m[:10])
	require.False(t, ok)
}

func TestAppendDoesNotAllocate(t *testing.T) {
	msgs := sample(t)
	buf := make([]byte, 0, 4096)
	allocs := testing.AllocsPerRun(10, func() {
		for _, m := range msgs {
			buf = itch.AppendText(buf[:0], m)
			buf = itch.AppendJSON(buf[:0], m)
		}
		buf = itch.AppendJSON(buf[:0], []byte{'Z', 1})
		buf = itch.AppendText(buf[:0], []byte{'A', 1})
	})
	require.Zero(t, allocs)
}

func BenchmarkAppend(b *testing.B) {
	msgs := sample(b)
	n := 0
	for _, m := range msgs {
		n += len(m)
	}
	buf := make([]byte, 0, 4096)
	for _, mode := range []struct {
		name string
		fn   func([]byte, []byte) []byte
	}{{"text", itch.AppendText}, {"json", itch.AppendJSON}} {
		b.Run(mode.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(n))
			for b.Loop() {
				for _, m := range msgs {
					buf = mode.fn(buf[:0], m)
				}
			}
		})
	}
}
