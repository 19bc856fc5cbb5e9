// Package e2e holds the end-to-end acceptance tests of mdbus: real
// publishers, subscribers and retransmitters on real sockets inside the
// private network lab (internal/netlab), checking that every subscriber
// delivers the exact stream that was sent.
//
// Sizes: without the race detector the tests run at full size (1,000,000
// messages); under -race, or with -short, they run a scaled-down stream so
// that CI's race run stays within its time budget. Run the full size alone
// with:
//
//	go test -count=1 -run Acceptance -v ./internal/e2e/
package e2e
