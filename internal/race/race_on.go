//go:build race

package race

// Enabled reports that the binary was built with -race.
const Enabled = true
