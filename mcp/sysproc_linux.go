package mcp

import "syscall"

// sysProcAttr puts the child in its own process group (so Close can kill the
// group) and asks the kernel to kill it if the bot dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
