package main

import (
	"testing"

	"github.com/mdbus/mdbus/internal/labtest"
)

// The tests that open sockets (pub --synthetic) run inside the private
// network lab; every test is checked for leaked goroutines.
func TestMain(m *testing.M) { labtest.Main(m) }
