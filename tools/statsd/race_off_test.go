//go:build !race

package statsd

const raceEnabled = false
