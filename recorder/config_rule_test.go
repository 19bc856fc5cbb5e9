package recorder

import (
	"net/netip"
	"testing"
	"time"

	"github.com/mdbus/mdbus/internal/cfgtest"
	"github.com/mdbus/mdbus/journal"
)

// TestConfigRule: a negative value is refused by name, before any socket
// is opened, where the field has no "none"; a zero value takes the
// default.
func TestConfigRule(t *testing.T) {
	feed := netip.MustParseAddrPort("239.192.0.1:31001")
	j, err := journal.Open(t.TempDir(), journal.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	rec := func(c Config) error { _, err := c.withDefaults(); return err }
	rew := func(c RewinderConfig) error { _, err := c.withDefaults(); return err }
	base, rbase := Config{Feed: feed, Journal: j}, RewinderConfig{Feed: feed, Upstream: netip.MustParseAddrPort("127.0.0.1:31100")}
	cfgtest.Refuses(t, ErrConfig, rec, base, "ReadBuffer", "MaxStreams", "NAK.Deadline", "NAK.Retry")
	cfgtest.Refuses(t, ErrConfig, rew, rbase, "ReadBuffer", "NAK.Deadline", "NAK.Window", "Cache.MaxMessages", "Cache.MaxBytes")
	cfgtest.Accepts(t, rec, base, "MaxStreamsPerSource")
	cfgtest.Accepts(t, rew, rbase, "Heartbeat")
	c, err := base.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	cfgtest.Fields(t, c, map[string]any{"ReadBuffer": DefaultRewinderReadBuffer, "NAK.Deadline": DefaultNAKDeadline})
	rc, err := rbase.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	cfgtest.Fields(t, rc, map[string]any{"ReadBuffer": DefaultRewinderReadBuffer, "NAK.Deadline": DefaultNAKDeadline, "Heartbeat": time.Second})
}
