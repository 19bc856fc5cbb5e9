package fetch

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestConfigRule: a negative value is refused with the field's name, a
// zero value takes the default.
func TestConfigRule(t *testing.T) {
	server := netip.MustParseAddrPort("127.0.0.1:9")
	for _, tc := range []struct {
		field string
		cfg   Config
	}{
		{"Wait", Config{Wait: -time.Millisecond}},
		{"Tries", Config{Tries: -1}},
		{"MaxPerRequest", Config{MaxPerRequest: -1}},
		{"Idle", Config{Idle: -1}},
	} {
		t.Run(tc.field, func(t *testing.T) {
			tc.cfg.Server = server
			_, err := Range(context.Background(), tc.cfg, 1, 2)
			require.ErrorIs(t, err, ErrConfig)
			require.ErrorContains(t, err, tc.field+" -")
		})
	}
	c, err := Config{}.withDefaults()
	require.NoError(t, err)
	require.Equal(t, Config{Wait: DefaultWait, Tries: DefaultTries, MaxPerRequest: DefaultMaxPerRequest, Idle: DefaultIdle}, c)
}
