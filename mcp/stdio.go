package mcp

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// proc is one running stdio server: its own process group, a minimal
// environment, stderr forwarded to the log (rate-limited).
type proc struct {
	cmd    *exec.Cmd
	stdin  *os.File
	stdout io.ReadCloser
	done   chan struct{} // closed once the process has exited and been reaped
	err    error         // exit status; read after done
	wg     sync.WaitGroup
	stop   sync.Once
}

// termGrace is how long a server's process group has after SIGTERM
// before SIGKILL.
const termGrace = 3 * time.Second

const (
	stderrBurst  = 20
	stderrWindow = 10 * time.Second
	maxLogLine   = 2048
)

// startProc starts command with exactly env as its environment.
func startProc(command, env []string, server string, logger *slog.Logger) (*proc, error) {
	cmd := exec.Command(command[0], command[1:]...)
	cmd.Env = env
	cmd.SysProcAttr = sysProcAttr()
	// stdin is a pipe of our own (not StdinPipe) so unread can look at it.
	stdinR, stdin, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdin = stdinR
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		stdinR.Close()
		stdin.Close()
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		stdinR.Close()
		stdin.Close()
		return nil, err
	}
	err = cmd.Start()
	stdinR.Close() // the child has its copy
	if err != nil {
		stdin.Close()
		return nil, fmt.Errorf("starting %s: %w", command[0], err)
	}
	p := &proc{cmd: cmd, stdin: stdin, stdout: stdout, done: make(chan struct{})}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		logStderr(stderr, server, logger)
		// Wait only after stderr hit EOF: exec.Cmd closes the pipes in Wait.
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// logStderr forwards the child's stderr line by line with the server name,
// at most stderrBurst lines per stderrWindow; the rest are counted.
func logStderr(r io.Reader, server string, logger *slog.Logger) {
	br := bufio.NewReaderSize(r, 4096)
	var (
		windowStart time.Time
		n, dropped  int
	)
	for {
		line, err := readLogLine(br)
		if len(line) > 0 {
			now := time.Now()
			if now.Sub(windowStart) > stderrWindow {
				if dropped > 0 {
					logger.Warn("mcp server stderr lines suppressed", "server", server, "count", dropped)
				}
				windowStart, n, dropped = now, 0, 0
			}
			if n < stderrBurst {
				logger.Info("mcp server stderr", "server", server, "line", line)
				n++
			} else {
				dropped++
			}
		}
		if err != nil {
			if dropped > 0 {
				logger.Warn("mcp server stderr lines suppressed", "server", server, "count", dropped)
			}
			return
		}
	}
}

// readLogLine returns one line truncated to maxLogLine, discarding the rest
// of an over-long line without buffering it.
func readLogLine(br *bufio.Reader) (string, error) {
	var buf []byte
	for {
		frag, err := br.ReadSlice('\n')
		if len(buf) < maxLogLine {
			buf = append(buf, frag[:min(len(frag), maxLogLine-len(buf))]...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		for len(buf) > 0 && (buf[len(buf)-1] == '\n' || buf[len(buf)-1] == '\r') {
			buf = buf[:len(buf)-1]
		}
		return string(buf), err
	}
}

// unread reports whether the child has yet to read what was written to
// its stdin (so it is still starting); false where that cannot be told.
func (p *proc) unread() bool {
	if p.exited() {
		return false
	}
	sc, err := p.stdin.SyscallConn()
	if err != nil {
		return false
	}
	n := 0
	_ = sc.Control(func(fd uintptr) { n = pipeUnread(fd) })
	return n > 0
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// shutdown closes stdin, gives the server grace to exit, then signals the
// whole process group (SIGTERM, then SIGKILL) and reaps it.
func (p *proc) shutdown(grace time.Duration) {
	p.stop.Do(func() {
		_ = p.stdin.Close()
		_ = p.stdout.Close()
		t := time.NewTimer(grace)
		select {
		case <-p.done:
			t.Stop()
		case <-t.C:
			// A package manager mid-install (npx, uvx) cleans up on
			// SIGTERM; SIGKILL would leave its cache half-written.
			killGroup(p.cmd, syscall.SIGTERM)
			t.Reset(termGrace)
			select {
			case <-p.done:
				t.Stop()
			case <-t.C:
			}
		}
		// Grandchildren may outlive the leader: kill what is left of the group.
		killGroup(p.cmd, syscall.SIGKILL)
		p.wg.Wait()
	})
}

func killGroup(cmd *exec.Cmd, sig syscall.Signal) {
	if cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, sig)
}

// stdioEnv is the child's environment: PATH and HOME from the bot's
// environment plus the variables the config names, nothing else (never the
// bot's tokens or SECRET_KEY).
func stdioEnv(cfg ServerConfig, getenv func(string) string) ([]string, error) {
	vars, err := expandMap(cfg.Env, getenv, "env")
	if err != nil {
		return nil, err
	}
	env := []string{}
	for _, k := range []string{"PATH", "HOME"} {
		if _, set := vars[k]; set {
			continue
		}
		if v := getenv(k); v != "" {
			env = append(env, k+"="+v)
		}
	}
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	return env, nil
}
