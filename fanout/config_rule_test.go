package fanout

import (
	"path/filepath"
	"testing"

	"github.com/mdbus/mdbus/internal/cfgtest"
	"github.com/mdbus/mdbus/subscriber"
)

// TestConfigRule: a negative value is refused by name where the field has
// no "none"; Spin keeps negative as never spin; a zero value takes the
// default.
func TestConfigRule(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.ring")
	base := ReaderConfig{Path: path, OnMessage: func(subscriber.Message) {}}
	check := func(c ReaderConfig) error { _, err := c.withDefaults(); return err }
	cfgtest.Refuses(t, ErrConfig, func(c ReaderConfig) error { _, err := OpenReader(c); return err }, base,
		"MaxStreams", "Fetch.Wait", "Fetch.Tries", "Fetch.MaxPerRequest", "Fetch.Idle")
	cfgtest.Refuses(t, ErrConfig, func(c WriterConfig) error { _, err := NewWriter(c); return err }, WriterConfig{Path: path}, "Capacity")
	cfgtest.Accepts(t, check, base, "Spin")
	c, err := base.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	cfgtest.Fields(t, c, map[string]any{"Spin": DefaultSpin, "MaxStreams": DefaultMaxStreams})
}
