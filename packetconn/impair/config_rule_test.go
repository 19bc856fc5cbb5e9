package impair

import (
	"testing"

	"github.com/mdbus/mdbus/internal/cfgtest"
)

// TestConfigRule: Validate refuses a negative value by name; a zero value
// takes the default.
func TestConfigRule(t *testing.T) {
	cfgtest.Refuses(t, ErrInvalidConfig, Config.Validate, Config{},
		"Loss", "Duplicate", "Reorder", "ReorderDepth", "ReorderWait", "Delay", "Jitter", "MaxHeld")
	s, err := Config{}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	cfgtest.Fields(t, s, map[string]any{"ReorderDepth": DefaultReorderDepth, "ReorderWait": DefaultReorderWait, "MaxHeld": DefaultMaxHeld})
}
