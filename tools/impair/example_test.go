package impair_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/signal"

	"github.com/mdbus/mdbus/packetconn/impair"
	impairtool "github.com/mdbus/mdbus/tools/impair"
)

// Relay forwards one group to another through a Sender impairment until
// interrupted, as "mdbus impair" does.
func ExampleRelay() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	st, err := impairtool.Relay(ctx, impairtool.RelayConfig{
		In:     netip.MustParseAddrPort("239.1.1.1:30000"),
		Out:    netip.MustParseAddrPort("239.1.1.2:30000"),
		Impair: impair.Config{Loss: 0.02, Reorder: 0.01, Seed: 1},
		Progress: func(s impairtool.RelayStats) {
			fmt.Fprintf(os.Stderr, "received %d, dropped %d\n", s.Received, s.Impair.Dropped)
		},
	})
	fmt.Println(st, err)
}
