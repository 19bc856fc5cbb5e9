package journal

import (
	"testing"

	"github.com/mdbus/mdbus/internal/cfgtest"
)

// TestConfigRule: Open refuses a negative value by name where the field
// has no "none"; RetainBytes and RetainAge keep negative as none; a zero
// value takes the default.
func TestConfigRule(t *testing.T) {
	open := func(c Config) error {
		j, err := Open(t.TempDir(), c)
		if err == nil {
			j.Close()
		}
		return err
	}
	cfgtest.Refuses(t, ErrConfig, open, Config{}, "SyncInterval", "SegmentBytes", "BlockBytes")
	cfgtest.Accepts(t, open, Config{}, "RetainBytes", "RetainAge")
	c, err := Config{}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	cfgtest.Fields(t, c, map[string]any{"SyncInterval": DefaultSyncInterval, "SegmentBytes": DefaultSegmentBytes, "BlockBytes": DefaultBlockBytes, "Perm": DefaultPerm})
}
