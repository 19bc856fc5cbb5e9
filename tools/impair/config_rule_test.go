package impair

import (
	"net/netip"
	"testing"

	"github.com/mdbus/mdbus/internal/cfgtest"
	"github.com/mdbus/mdbus/packetconn/impair"
)

// TestConfigRule: a negative value is refused by name; a zero value takes
// the default.
func TestConfigRule(t *testing.T) {
	base := RelayConfig{In: netip.MustParseAddrPort("239.192.0.1:31001"), Out: netip.MustParseAddrPort("239.192.0.2:31001")}
	check := func(c RelayConfig) error { _, err := c.withDefaults(); return err }
	cfgtest.Refuses(t, impair.ErrInvalidConfig, check, base, "TTL", "Batch", "ReadBuffer", "ProgressEvery", "Impair.Loss")
	c, err := base.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	cfgtest.Fields(t, c, map[string]any{"Interface": DefaultRelayInterface, "Batch": DefaultRelayBatch,
		"ReadBuffer": DefaultRelayReadBuffer, "ProgressEvery": DefaultProgressEvery})
}
