package demo

import (
	"strings"
	"testing"
	"time"

	"github.com/mdbus/mdbus/internal/cfgtest"
)

// TestConfigRule: a negative value is refused by name; a zero value takes
// the default.
func TestConfigRule(t *testing.T) {
	check := func(c Config) error { _, err := c.withDefaults(); return err }
	cfgtest.Refuses(t, ErrConfig, check, Config{}, "Subscribers", "Duration", "Rate", "Loss", "Reorder", "Dup", "Linger")
	if _, err := (Config{Linger: 2 * time.Second}).withDefaults(); err == nil || !strings.Contains(err.Error(), "Linger 2s") {
		t.Fatalf("a Linger over publisher.MaxLinger: %v", err)
	}
	c, err := Config{}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	cfgtest.Fields(t, c, map[string]any{"Interface": "lo", "Subscribers": 3, "Duration": 5 * time.Second, "Rate": 200_000, "Seed": 1})
	if got := c.Group.String(); got != "239.192.0.1:31001" {
		t.Fatalf("default group %s", got)
	}
}
