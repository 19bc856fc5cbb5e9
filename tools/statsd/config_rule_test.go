package statsd

import (
	"testing"
	"time"

	"github.com/mdbus/mdbus/internal/cfgtest"
)

// TestConfigRule: a negative value is refused by name where the field has
// no "none"; SelfInterval keeps negative as never; a zero value takes the
// default.
func TestConfigRule(t *testing.T) {
	relay := func(c RelayConfig) error { _, err := c.withDefaults(); return err }
	client := func(c ClientConfig) error { _, err := c.withDefaults(); return err }
	collector := func(c CollectorConfig) error { _, err := c.withDefaults(); return err }
	cfgtest.Refuses(t, ErrConfig, relay, RelayConfig{}, "ReadBuffer", "BatchSize", "DatagramSize", "PreAggregate", "TickInterval",
		"MaxMessageLen", "EndGrace", "LogEvery", "Limits.MaxLineLen", "Limits.MaxNameLen", "Limits.MaxTags", "Limits.MaxTagBytes", "Limits.MaxValues", "Cache.MaxBytes")
	cfgtest.Refuses(t, ErrConfig, client, ClientConfig{}, "FlushEvery", "TickInterval", "MaxMessageLen", "Limits.MaxTags", "Cache.MaxSessions")
	cfgtest.Refuses(t, ErrConfig, collector, CollectorConfig{}, "MaxSeries", "MaxSetMembers", "MaxHistograms", "IdleExpiry", "StreamTimeout", "Limits.MaxTagBytes")
	cfgtest.Accepts(t, relay, RelayConfig{}, "SelfInterval")

	r, err := RelayConfig{}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	cfgtest.Fields(t, r, map[string]any{"ReadBuffer": DefaultRelayBuffer, "BatchSize": DefaultRelayBatch, "DatagramSize": DefaultDatagramSize,
		"TickInterval": DefaultTickInterval, "SelfInterval": DefaultSelfInterval, "EndGrace": time.Second, "LogEvery": DefaultLogEvery, "Limits.MaxLineLen": DefaultMaxLineLen})
	c, err := ClientConfig{}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	cfgtest.Fields(t, c, map[string]any{"FlushEvery": time.Millisecond, "TickInterval": DefaultTickInterval})
	co, err := CollectorConfig{}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	cfgtest.Fields(t, co, map[string]any{"MaxSeries": DefaultMaxSeries, "MaxSetMembers": DefaultMaxSetMembers, "MaxHistograms": DefaultMaxHistograms,
		"IdleExpiry": DefaultIdleExpiry, "StreamTimeout": DefaultStreamTimeout, "FlushInterval": DefaultFlushInterval})
}
