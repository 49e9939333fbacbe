package faulttest

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// k8sObject is the part of a Kubernetes manifest the checks read.
type k8sObject struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Data map[string]string `yaml:"data"`
	// Secret
	StringData map[string]string `yaml:"stringData"`
	Spec       struct {
		Replicas *int `yaml:"replicas"`
		Strategy struct {
			RollingUpdate struct {
				MaxSurge any `yaml:"maxSurge"`
			} `yaml:"rollingUpdate"`
		} `yaml:"strategy"`
		Template struct {
			Spec struct {
				TerminationGracePeriodSeconds int `yaml:"terminationGracePeriodSeconds"`
				Containers                    []struct {
					Args           []string `yaml:"args"`
					LivenessProbe  *probe   `yaml:"livenessProbe"`
					ReadinessProbe *probe   `yaml:"readinessProbe"`
				} `yaml:"containers"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type probe struct {
	HTTPGet *struct {
		Path string `yaml:"path"`
	} `yaml:"httpGet"`
}

// TestDeployManifests checks deploy/: three replicas with /healthz and
// /readyz probes, a grace period longer than SHUTDOWN_GRACE, a socket
// budget within Slack's 10 per app, only known settings, and a Redis
// StatefulSet with AOF.
func TestDeployManifests(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "deploy", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in deploy/: %v", err)
	}
	objs := map[string]k8sObject{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(data))
		for {
			var o k8sObject
			if err := dec.Decode(&o); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if o.Kind != "" {
				objs[o.Kind+"/"+o.Metadata.Name] = o
			}
		}
	}
	dep, ok := objs["Deployment/bobbin"]
	if !ok {
		t.Fatalf("no Deployment bobbin among %d objects", len(objs))
	}
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas != 3 {
		t.Errorf("Deployment replicas = %v, want 3", dep.Spec.Replicas)
	}
	c := dep.Spec.Template.Spec.Containers
	if len(c) != 1 || c[0].LivenessProbe == nil || c[0].LivenessProbe.HTTPGet == nil || c[0].LivenessProbe.HTTPGet.Path != "/healthz" ||
		c[0].ReadinessProbe == nil || c[0].ReadinessProbe.HTTPGet == nil || c[0].ReadinessProbe.HTTPGet.Path != "/readyz" {
		t.Errorf("the bot container needs a liveness probe on /healthz and a readiness probe on /readyz")
	}

	cfg := objs["ConfigMap/bobbin-config"].Data
	sec := objs["Secret/bobbin-secrets"].StringData
	known := configNames(t)
	for _, m := range []map[string]string{cfg, sec} {
		for k := range m {
			if !known[k] {
				t.Errorf("deploy sets %s, which cmd/bot does not read", k)
			}
		}
	}
	for _, k := range []string{"SLACK_BOT_TOKEN", "SLACK_APP_TOKEN"} {
		if _, ok := sec[k]; !ok {
			t.Errorf("the Secret lacks %s", k)
		}
	}
	sockets, _ := strconv.Atoi(cmpOr(cfg["SOCKET_CONNECTIONS"], "1"))
	surge, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(cmpOr(toString(dep.Spec.Strategy.RollingUpdate.MaxSurge), "1"), "%")))
	if n := (3 + surge) * sockets; n > 10 {
		t.Errorf("socket budget (3 replicas + %d surge) × %d connections = %d > 10", surge, sockets, n)
	}
	grace := strings.TrimSuffix(cmpOr(cfg["SHUTDOWN_GRACE"], "25s"), "s")
	if g, err := strconv.Atoi(grace); err != nil || g >= dep.Spec.Template.Spec.TerminationGracePeriodSeconds {
		t.Errorf("SHUTDOWN_GRACE %ss must be shorter than terminationGracePeriodSeconds %d", grace, dep.Spec.Template.Spec.TerminationGracePeriodSeconds)
	}

	if _, ok := objs["StatefulSet/bobbin-redis"]; !ok {
		t.Error("no Redis StatefulSet bobbin-redis")
	}
	if conf := objs["ConfigMap/bobbin-redis"].Data["redis.conf"]; !strings.Contains(conf, "appendonly yes") {
		t.Error("Redis is not configured with appendonly yes")
	}
}

// configNames reads the environment variable names cmd/bot understands.
func configNames(t *testing.T) map[string]bool {
	data, err := os.ReadFile(filepath.Join("..", "..", "cmd", "bot", "config.go"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, m := range regexp.MustCompile(`env:"([A-Z0-9_]+)`).FindAllSubmatch(data, -1) {
		out[string(m[1])] = true
	}
	return out
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func toString(v any) string {
	switch x := v.(type) {
	case int:
		return strconv.Itoa(x)
	case string:
		return x
	}
	return ""
}
