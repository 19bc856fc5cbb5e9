//go:build linux

package netlab

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

// start starts exe with args in a new network namespace. A root caller
// gets a plain network namespace (CLONE_NEWNET): it keeps the host's
// capabilities, so the lab's sockets may use SO_RCVBUFFORCE to get the
// receive buffers a feed handler is given in production, beyond
// net.core.rmem_max (a user namespace cannot; rmem_max itself is not per
// namespace and the lab never changes it). Everyone else, or a root
// caller the kernel refuses, gets a new user namespace as well, mapping
// the caller to root inside it.
func start(exe string, args, env []string, root bool) (*exec.Cmd, error) {
	if root {
		cmd := command(exe, args, env, true)
		if err := cmd.Start(); err == nil {
			return cmd, nil
		}
	}
	cmd := command(exe, args, env, false)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("netlab: cannot create a user+network namespace (%w); "+
			"enable unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, "+
			"or kernel.apparmor_restrict_unprivileged_userns=0) or run as root", err)
	}
	return cmd, nil
}

// command is exe with args to run in a new network namespace, and unless
// plain in a new user namespace too, with this process's standard streams
// and environment plus env.
func command(exe string, args, env []string, plain bool) *exec.Cmd {
	cmd := exec.Command(exe, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(append(os.Environ(), env...), envIn+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, Pdeathsig: syscall.SIGKILL}
	if !plain {
		cmd.SysProcAttr.Cloneflags |= syscall.CLONE_NEWUSER
		cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}}
		cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}}
		cmd.SysProcAttr.GidMappingsEnableSetgroups = false
	}
	return cmd
}
