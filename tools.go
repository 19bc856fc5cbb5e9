//go:build tools

// This file keeps the project's chosen dependencies in go.mod before every
// package uses them; it is never built.
package mdbus

import (
	_ "github.com/HdrHistogram/hdrhistogram-go"
	_ "github.com/klauspost/compress/zstd"
	_ "github.com/stretchr/testify/require"
	_ "go.uber.org/goleak"
	_ "golang.org/x/net/ipv4"
)
