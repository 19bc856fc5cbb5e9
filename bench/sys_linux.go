package bench

import (
	"os/exec"
	"syscall"
)

// killWithParent makes the kernel kill cmd's process when this one dies,
// so that no benchmark child outlives an interrupted run.
func killWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// schedYield gives the CPU to any other runnable thread (sched_yield(2)).
func schedYield() { syscall.RawSyscall(syscall.SYS_SCHED_YIELD, 0, 0, 0) }
