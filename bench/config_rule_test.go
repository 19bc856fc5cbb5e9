package bench

import (
	"net/netip"
	"testing"
	"time"

	"github.com/mdbus/mdbus/internal/cfgtest"
)

// TestConfigRule: a negative value is refused by name where the field has
// no "none", accepted where its doc says so, and a zero value takes the
// default.
func TestConfigRule(t *testing.T) {
	check := func(c Config) error { _, err := c.withDefaults(); return err }
	cfgtest.Refuses(t, ErrConfig, check, Config{}, "Duration", "Count", "PayloadSize", "Batch", "ReadBuffer", "WriteBuffer", "BusyPoll", "Interval", "Drain", "TTL")
	cfgtest.Accepts(t, check, Config{}, "Warmup", "Linger", "Spin")
	s, err := Config{}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	cfgtest.Fields(t, s.Config, map[string]any{"Duration": DefaultDuration, "Warmup": DefaultWarmup, "Linger": DefaultLinger, "Spin": DefaultSpin,
		"ReadBuffer": DefaultReadBuffer, "WriteBuffer": DefaultWriteBuffer, "Batch": DefaultBatch, "Interval": DefaultInterval, "Drain": DefaultDrain})

	group := GroupConfig{Subs: 1, Count: 1, Rate: 1, Size: 8, Group: netip.MustParseAddrPort("239.192.0.1:31001")}
	cfgtest.Refuses(t, ErrConfig, func(c GroupConfig) error { _, err := c.withDefaults(); return err }, group, "Timeout")
	g, err := group.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	cfgtest.Fields(t, g, map[string]any{"Timeout": 60 * time.Second})

	search := func(c SearchConfig) error { _, err := c.withDefaults(); return err }
	cfgtest.Refuses(t, ErrConfig, search, SearchConfig{Start: 1}, "Start", "Min", "Factor", "Resolution", "MaxProbes", "Budget")
	sc, err := SearchConfig{Start: 1}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	cfgtest.Fields(t, sc, map[string]any{"Min": 1, "Max": MaxRate, "Factor": 2, "Resolution": DefaultResolution, "MaxProbes": DefaultMaxProbes})
}
