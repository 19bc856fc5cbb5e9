package fanout

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/mdbus/mdbus/fetch"
	"github.com/mdbus/mdbus/subscriber"
	"github.com/stretchr/testify/require"
)

// TestConfigRule: a negative value is refused with the field's name where
// the field has no "none", Spin keeps negative as "never spins", and a
// zero value takes the default.
func TestConfigRule(t *testing.T) {
	on := func(subscriber.Message) {}
	path := filepath.Join(t.TempDir(), "x.ring")
	for _, tc := range []struct {
		field string
		cfg   ReaderConfig
	}{
		{"MaxStreams", ReaderConfig{MaxStreams: -1}},
		{"Fetch.Wait", ReaderConfig{Fetch: fetch.Config{Wait: -1}}},
		{"Fetch.Tries", ReaderConfig{Fetch: fetch.Config{Tries: -1}}},
	} {
		t.Run(tc.field, func(t *testing.T) {
			tc.cfg.Path, tc.cfg.OnMessage = path, on
			_, err := OpenReader(tc.cfg)
			require.ErrorIs(t, err, ErrConfig)
			require.ErrorContains(t, err, tc.field+" -")
		})
	}
	_, err := NewWriter(WriterConfig{Path: path, Capacity: -1})
	require.ErrorIs(t, err, ErrConfig)
	require.ErrorContains(t, err, "Capacity -1")

	c, err := ReaderConfig{Path: path, OnMessage: on, Spin: -time.Microsecond}.withDefaults()
	require.NoError(t, err, "Spin: negative means never spins")
	require.Negative(t, c.Spin)
	c, err = ReaderConfig{Path: path, OnMessage: on}.withDefaults()
	require.NoError(t, err)
	require.Equal(t, DefaultSpin, c.Spin)
	require.Equal(t, DefaultMaxStreams, c.MaxStreams)
}
