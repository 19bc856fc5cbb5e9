package subscriber

import (
	"net/netip"
	"testing"

	"github.com/mdbus/mdbus/internal/cfgtest"
	"github.com/mdbus/mdbus/nak"
)

// TestConfigRefusesNegativeNAK: the NAK settings follow Config's rule; a
// negative one is refused with its name, wrapping both packages'
// ErrConfig, before any socket is opened.
func TestConfigRefusesNegativeNAK(t *testing.T) {
	for _, is := range []error{ErrConfig, nak.ErrConfig} {
		cfgtest.Refuses(t, is, func(c Config) error { _, err := c.withDefaults(); return err },
			Config{Group: netip.MustParseAddrPort("239.192.0.1:31001")}, "Recovery.NAK.Retry", "Recovery.NAK.Deadline", "Recovery.NAK.Window")
	}
}
