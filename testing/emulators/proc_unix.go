//go:build unix && !linux

package emulators

import (
	"os/exec"
	"syscall"
)

// setProcessGroup puts the child in a process group of its own, so that
// stopping it also stops anything it spawned.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// kill kills the child's process group.
func kill(cmd *exec.Cmd) {
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
}
