package resume

import (
	"path/filepath"
	"testing"

	"github.com/mdbus/mdbus/internal/cfgtest"
	"github.com/mdbus/mdbus/subscriber"
)

// TestConfigRule: a negative value is refused by name; a zero value takes
// the default.
func TestConfigRule(t *testing.T) {
	base := Config{OnMessage: func(subscriber.Message) {}}
	cfgtest.Refuses(t, ErrConfig, func(c Config) error { _, err := c.withDefaults(); return err }, base, "MaxBuffered", "MaxBufferedBytes")
	path := filepath.Join(t.TempDir(), "ckpt")
	cfgtest.Refuses(t, ErrConfig, func(c CheckpointConfig) error { _, err := OpenCheckpoint(path, c); return err }, CheckpointConfig{}, "Interval")
	c, err := base.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	cfgtest.Fields(t, c, map[string]any{"MaxBuffered": DefaultMaxBuffered, "MaxBufferedBytes": DefaultMaxBufferedBytes})
	ck, err := OpenCheckpoint(path, CheckpointConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	cfgtest.Fields(t, ck.cfg, map[string]any{"Interval": DefaultInterval})
}
