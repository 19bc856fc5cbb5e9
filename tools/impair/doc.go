// Package impair is the impairment relay behind "mdbus impair": it joins
// one multicast group, passes every datagram through a Sender of the
// impairment layer (packetconn/impair: seeded loss, duplication, reordering,
// delay and exact drop rules) and sends what survives to another group, so
// that every subscriber of the second group sees the same impairment and a
// person can watch recovery with real binaries.
//
//	st, err := impair.Relay(ctx, impair.RelayConfig{
//		In:     netip.MustParseAddrPort("239.1.1.1:30000"),
//		Out:    netip.MustParseAddrPort("239.1.1.2:30000"),
//		Impair: layer.Config{Loss: 0.02, Seed: 1}, // layer is packetconn/impair
//	})
//
// Relay runs until its context is cancelled; it then sends what the
// impairment still holds and returns its counts.
package impair
