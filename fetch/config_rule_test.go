package fetch

import (
	"context"
	"net/netip"
	"testing"

	"github.com/mdbus/mdbus/internal/cfgtest"
)

// TestConfigRule: Range refuses a negative value by name, before it
// sends anything; a zero value takes the default.
func TestConfigRule(t *testing.T) {
	fetch := func(c Config) error { _, err := Range(context.Background(), c, 1, 2); return err }
	cfgtest.Refuses(t, ErrConfig, fetch, Config{Server: netip.MustParseAddrPort("127.0.0.1:9")}, "Wait", "Tries", "MaxPerRequest", "Idle")
	c, err := Config{}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	cfgtest.Fields(t, c, map[string]any{"Wait": DefaultWait, "Tries": DefaultTries, "MaxPerRequest": DefaultMaxPerRequest, "Idle": DefaultIdle})
}
