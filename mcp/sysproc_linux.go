package mcp

import (
	"syscall"
	"unsafe"
)

// sysProcAttr puts the child in its own process group (so Close can kill the
// group) and asks the kernel to kill it if the bot dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// pipeUnread is how many bytes wait in the pipe fd is an end of (FIONREAD
// works on either end of a Linux pipe); 0 on error.
func pipeUnread(fd uintptr) int {
	var n int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCINQ, uintptr(unsafe.Pointer(&n))); e != 0 {
		return 0
	}
	return int(n)
}
