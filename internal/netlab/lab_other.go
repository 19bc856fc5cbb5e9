//go:build !linux

package netlab

import (
	"errors"
	"fmt"
	"os/exec"
	"runtime"
)

// errUnsupported is why there is no lab here: it is made of Linux network
// and user namespaces. Main then runs the tests outside it and Require
// skips them with this reason.
var errUnsupported = fmt.Errorf("netlab: the lab needs Linux network namespaces, not supported on %s: %w", runtime.GOOS, errors.ErrUnsupported)

func start(string, []string, []string, bool) (*exec.Cmd, error) { return nil, errUnsupported }
