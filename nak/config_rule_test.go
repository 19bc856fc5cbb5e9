package nak

import (
	"testing"

	"github.com/mdbus/mdbus/internal/cfgtest"
)

// TestConfigRule: Check refuses a negative value by name; a zero value
// takes the default.
func TestConfigRule(t *testing.T) {
	cfgtest.Refuses(t, ErrConfig, Config.Check, Config{}, "Delay", "Retry", "MaxRetry", "Continue", "Deadline", "MaxRequest", "Window")
	cfgtest.Fields(t, NewLossDetector(Config{}).Config(), map[string]any{"Delay": DefaultDelay, "Retry": DefaultRetry,
		"MaxRetry": DefaultMaxRetry, "Continue": DefaultContinue, "Deadline": DefaultDeadline, "MaxRequest": DefaultMaxRequest, "Window": DefaultWindow})
}
