//go:build race

package statsd

// raceEnabled: the race detector slows the relay 5-10x, so the
// acceptance tests send their short sizes (full size runs without -race).
const raceEnabled = true
