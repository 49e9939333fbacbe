//go:build unix && !linux

package mcp

import "syscall"

// sysProcAttr puts the child in its own process group so Close can kill the
// group.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// pipeUnread cannot be told here: 0 (a server counts as started).
func pipeUnread(uintptr) int { return 0 }
