//go:build race

package main

// boundRace: the race detector multiplies memory and time several times,
// so the import bounds are not measured under it.
const boundRace = true
