package cfgcheck

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var errConfig = errors.New("x: invalid config")

func TestNegative(t *testing.T) {
	require.NoError(t, Negative(errConfig, F("A", 0), F("B", 1.5), F("C", time.Second)))
	err := Negative(errConfig, F("A", 0), F("B", -time.Millisecond), F("C", -1))
	require.ErrorIs(t, err, errConfig)
	require.EqualError(t, err, "x: invalid config: B -1ms: must not be negative (0: the default)")
	require.ErrorContains(t, Negative(errConfig, F("Rate", -0.5)), "Rate -0.5")
}

func TestOrNone(t *testing.T) {
	require.Equal(t, 7, OrNone(0, 7))
	require.Equal(t, 0, OrNone(-3, 7))
	require.Equal(t, 5, OrNone(5, 7))
	require.Equal(t, time.Duration(0), OrNone(-time.Second, time.Minute))
}
