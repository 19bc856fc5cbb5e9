package publisher

import (
	"net/netip"
	"testing"

	"github.com/mdbus/mdbus/internal/cfgtest"
)

// TestConfigRule: a negative value is refused by name where the field has
// no "none", accepted where its doc says so, and a zero value takes the
// default.
func TestConfigRule(t *testing.T) {
	check := func(c Config) error { _, err := c.withDefaults(); return err }
	base := Config{Group: netip.MustParseAddrPort("239.192.0.1:31001"), Sinks: []Sink{nopSink{}}}
	cfgtest.Refuses(t, ErrConfig, check, base, "TTL", "PayloadSize", "RateMessages", "RateBytes", "BatchPackets", "QueuePackets", "Linger")
	cfgtest.Accepts(t, check, base, "HeartbeatInterval", "WriteBuffer", "Grace")
	s, err := base.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	cfgtest.Fields(t, s.Config, map[string]any{"Interface": DefaultInterface, "HeartbeatInterval": DefaultHeartbeatInterval,
		"WriteBuffer": DefaultWriteBuffer, "BatchPackets": DefaultBatchPackets, "QueuePackets": DefaultQueuePackets, "Grace": DefaultGrace, "PayloadSize": 1472})
}

type nopSink struct{}

func (nopSink) SentPacket([]byte) {}
