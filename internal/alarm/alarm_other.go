//go:build !linux

package alarm

import "errors"

func newKernelTimer(func()) (kernelTimer, error) {
	return nil, errors.New("alarm: no kernel timer on this platform")
}
