package pcap

import (
	"bytes"
	"net/netip"
	"testing"
	"time"

	"github.com/mdbus/mdbus/journal"
	"github.com/mdbus/mdbus/wire"
	"github.com/stretchr/testify/require"
)

// TestConfigRule: a negative value is refused with the field's name where
// the field has no "none", and a zero value takes the default.
func TestConfigRule(t *testing.T) {
	for _, tc := range []struct {
		field string
		err   error
	}{
		{"Reassembly.MaxDatagrams", Reassembly{MaxDatagrams: -1}.Check()},
		{"Reassembly.MaxBytes", Reassembly{MaxBytes: -1}.Check()},
		{"Reassembly.Timeout", Reassembly{Timeout: -time.Second}.Check()},
		{"MaxOpen", ImportConfig{MaxOpen: -1}.Check()},
		{"MaxGaps", ImportConfig{MaxGaps: -1}.Check()},
		{"ReorderBytes", ImportConfig{ReorderBytes: -1}.Check()},
	} {
		t.Run(tc.field, func(t *testing.T) {
			require.ErrorIs(t, tc.err, ErrConfig)
			require.ErrorContains(t, tc.err, tc.field+" -")
		})
	}
	_, err := NewReader(bytes.NewReader(nil), Config{Reassembly: Reassembly{MaxBytes: -1}})
	require.ErrorIs(t, err, ErrConfig)
	_, err = NewSender(SendConfig{Group: netip.MustParseAddrPort("239.192.0.1:31001"), TTL: -1})
	require.ErrorIs(t, err, ErrConfig)
	require.ErrorContains(t, err, "TTL -1")

	j, err := journal.Open(t.TempDir(), journal.Config{})
	require.NoError(t, err)
	defer j.Close()
	s, err := wire.ParseSession("A")
	require.NoError(t, err)
	id := wire.StreamID{Session: s, Incarnation: 1}
	for _, tc := range []struct {
		field string
		cfg   ExportConfig
	}{
		{"FromTime", ExportConfig{FromTime: -1}},
		{"ToTime", ExportConfig{ToTime: -1}},
		{"PayloadSize", ExportConfig{PayloadSize: -1}},
	} {
		t.Run("Export "+tc.field, func(t *testing.T) {
			_, err := Export(nil, j, id, tc.cfg)
			require.ErrorIs(t, err, ErrConfig)
			require.ErrorContains(t, err, tc.field+" -")
		})
	}

	require.NoError(t, ImportConfig{MaxStreams: -1, Reorder: -1}.Check(), "negative: none, where the doc says so")
	ic := ImportConfig{}.withDefaults()
	require.Equal(t, ImportConfig{MaxOpen: 32, MaxStreams: DefaultMaxStreams, MaxGaps: 1000, Reorder: 64, ReorderBytes: 16 << 20}, ic)
	require.Equal(t, Reassembly{MaxDatagrams: defaultMaxDatagrams, MaxBytes: defaultMaxFragBytes, Timeout: defaultFragTimeout}, Reassembly{}.withDefaults())
}
