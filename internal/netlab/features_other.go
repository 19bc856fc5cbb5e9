//go:build !linux

package netlab

// Offload feature names (see the Linux build).
const (
	FeatureUDPSegmentation = "tx-udp-segmentation"
	FeatureGRO             = "rx-gro"
)

// SetFeature fails: there are no lab devices here.
func SetFeature(dev, name string, on bool) error { return errUnsupported }
