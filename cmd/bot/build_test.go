package main

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
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
	// Every image runs this binary (TestDockerfileTargets): started with
	// an empty environment it must say what is missing and exit 1.
	bin := args[slices.Index(args, "-o")+1]
	run := exec.Command(bin)
	run.Env = []string{}
	out, err := run.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.HasPrefix(string(out), "bobbin: configuration:") || !strings.Contains(string(out), "SLACK_BOT_TOKEN is required") {
		t.Errorf("the built binary with no environment: %v\n%s", err, out)
	}
}

// dockerStage is one FROM … of the Dockerfile.
type dockerStage struct {
	base, name string
	lines      []string
}

func dockerStages(t *testing.T) []dockerStage {
	t.Helper()
	raw, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var stages []dockerStage
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		if strings.EqualFold(f[0], "FROM") {
			st := dockerStage{base: f[1]}
			if len(f) == 4 && strings.EqualFold(f[2], "AS") {
				st.name = f[3]
			}
			stages = append(stages, st)
			continue
		}
		if len(stages) > 0 {
			stages[len(stages)-1].lines = append(stages[len(stages)-1].lines, line)
		}
	}
	return stages
}

// TestDockerfileTargets: every image the Dockerfile builds starts from a
// pinned base, carries the binary the build stage made (the one
// TestDockerBuildCommand builds and runs) as its entrypoint, and runs as a
// numeric non-root user (Kubernetes' runAsNonRoot cannot check names). The
// default target (the last) is the distroless one.
func TestDockerfileTargets(t *testing.T) {
	stages := dockerStages(t)
	if len(stages) < 3 || stages[0].name != "build" {
		t.Fatalf("stages %v: want the build stage first and at least two images", stages)
	}
	if last := stages[len(stages)-1]; last.name != "bobbin" || !strings.HasPrefix(last.base, "gcr.io/distroless/") {
		t.Errorf("the default target is %s from %s, want bobbin from distroless", last.name, last.base)
	}
	for _, st := range stages {
		if !pinned(st.base) {
			t.Errorf("stage %s: base image %s is not pinned", st.name, st.base)
		}
		if st.name == "build" {
			continue
		}
		var dest, entry, user string
		for _, l := range st.lines {
			f := strings.Fields(l)
			switch {
			case len(f) == 4 && f[0] == "COPY" && f[1] == "--from=build" && f[2] == "/out/bobbin":
				dest = f[3]
			case len(f) >= 2 && f[0] == "ENTRYPOINT":
				entry = strings.TrimSpace(strings.TrimPrefix(l, "ENTRYPOINT"))
			case len(f) == 2 && f[0] == "USER":
				user = f[1]
			}
		}
		if dest == "" || entry != `["`+dest+`"]` {
			t.Errorf("target %s: COPY --from=build /out/bobbin to %q, ENTRYPOINT %s: want the copied binary as the entrypoint", st.name, dest, entry)
		}
		uid, _, _ := strings.Cut(user, ":")
		if n, err := strconv.Atoi(uid); err != nil || n == 0 {
			t.Errorf("target %s: USER %q, want a numeric non-root uid", st.name, user)
		}
	}
}
