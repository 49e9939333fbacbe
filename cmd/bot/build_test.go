package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDockerBuildCommand runs the go build command of the Dockerfile, so CI
// (which has no Docker engine) proves the image's build step works.
func TestDockerBuildCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	f, err := os.Open("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cmdline string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, "RUN CGO_ENABLED=0 go build") {
			cmdline = strings.TrimPrefix(line, "RUN ")
		}
	}
	if cmdline == "" {
		t.Fatal("Dockerfile has no 'RUN CGO_ENABLED=0 go build' line")
	}
	fields := strings.Fields(cmdline)
	// CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/bobbin ./cmd/bot
	var args []string
	for i := 2; i < len(fields); i++ {
		switch a := fields[i]; {
		case a == "-o":
			args = append(args, "-o", filepath.Join(t.TempDir(), "bobbin"))
			i++
		case strings.HasPrefix(a, `-ldflags="`):
			// Re-join the quoted value the shell would pass as one word.
			v := strings.TrimPrefix(a, `-ldflags="`)
			for !strings.HasSuffix(v, `"`) && i+1 < len(fields) {
				i++
				v += " " + fields[i]
			}
			args = append(args, "-ldflags="+strings.TrimSuffix(v, `"`))
		case a == "./cmd/bot":
			args = append(args, ".")
		default:
			args = append(args, a)
		}
	}
	cmd := exec.Command("go", args...)
	cmd.Env = append(os.Environ(), strings.Fields(cmdline)[0])
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, out)
	}
}
