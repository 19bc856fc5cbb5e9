package replay

import (
	"testing"

	"github.com/mdbus/mdbus/internal/cfgtest"
)

// TestConfigRule: a negative value is refused by name where the field has
// no "none"; Spin keeps negative as never spin; a zero value takes the
// default.
func TestConfigRule(t *testing.T) {
	check := func(c Config) error { _, err := NewPacer(c); return err }
	cfgtest.Refuses(t, ErrConfig, check, Config{}, "Speed", "Rate", "PPS", "Mbps")
	cfgtest.Accepts(t, check, Config{}, "Spin")
	c, err := Config{}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	cfgtest.Fields(t, c, map[string]any{"Speed": 1, "Spin": DefaultSpin})
}
