package counters

import (
	"testing"

	"github.com/mdbus/mdbus/internal/cfgtest"
)

// TestConfigRule: a negative Slots is refused by name; a negative
// Interval means no sampling goroutine; a zero value takes the default.
func TestConfigRule(t *testing.T) {
	check := func(c Config) error { _, err := c.withDefaults(); return err }
	cfgtest.Refuses(t, ErrConfig, check, Config{}, "Slots")
	cfgtest.Accepts(t, check, Config{}, "Interval")
	c, err := Config{}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	cfgtest.Fields(t, c, map[string]any{"Dir": DefaultDir(), "Role": "mdbus", "Slots": DefaultSlots, "Interval": DefaultInterval})
}
