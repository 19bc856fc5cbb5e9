//go:build !race

package main

const boundRace = false
