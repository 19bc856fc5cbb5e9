package pcap

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/mdbus/mdbus/internal/cfgtest"
	"github.com/mdbus/mdbus/journal"
	"github.com/mdbus/mdbus/wire"
)

// TestConfigRule: a negative value is refused by name where the field has
// no "none", accepted where its doc says so, and a zero value takes the
// default.
func TestConfigRule(t *testing.T) {
	cfgtest.Refuses(t, ErrConfig, Reassembly.Check, Reassembly{}, "MaxDatagrams", "MaxBytes", "Timeout")
	cfgtest.Refuses(t, ErrConfig, func(c Config) error { _, err := NewReader(bytes.NewReader(nil), c); return err }, Config{}, "Reassembly.MaxBytes")
	cfgtest.Refuses(t, ErrConfig, ImportConfig.Check, ImportConfig{}, "MaxOpen", "MaxGaps", "ReorderBytes")
	cfgtest.Accepts(t, ImportConfig.Check, ImportConfig{}, "MaxStreams", "Reorder")
	send := func(c SendConfig) error { _, err := NewSender(c); return err }
	cfgtest.Refuses(t, ErrConfig, send, SendConfig{Group: netip.MustParseAddrPort("239.192.0.1:31001")}, "TTL")

	j, err := journal.Open(t.TempDir(), journal.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	export := func(c ExportConfig) error { _, err := Export(nil, j, wire.StreamID{Incarnation: 1}, c); return err }
	cfgtest.Refuses(t, ErrConfig, export, ExportConfig{}, "FromTime", "ToTime", "PayloadSize")

	cfgtest.Fields(t, ImportConfig{}.withDefaults(), map[string]any{"MaxOpen": 32, "MaxStreams": DefaultMaxStreams, "MaxGaps": 1000, "Reorder": 64, "ReorderBytes": 16 << 20})
	cfgtest.Fields(t, Reassembly{}.withDefaults(), map[string]any{"MaxDatagrams": defaultMaxDatagrams, "MaxBytes": defaultMaxFragBytes, "Timeout": defaultFragTimeout})
}
