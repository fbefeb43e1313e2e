//go:build !unix

package emulators

import "os/exec"

// setProcessGroup does nothing where process groups are not available.
func setProcessGroup(*exec.Cmd) {}

// kill kills the child process.
func kill(cmd *exec.Cmd) { _ = cmd.Process.Kill() }
