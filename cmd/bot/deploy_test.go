package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/bobbinbot/bobbin/mcp"
)

// The deploy files cannot be run here (no Docker engine, no cluster), so
// these tests read them and check what an operator relies on: images
// pinned, secrets never tracked, generated names that roll the pods,
// probes that outwait their handlers, hardened pods, a bounded Redis, and
// compose and Kubernetes agreeing with each other and with the code.

const repo = "../.."

// yamlDocs decodes every document of a YAML file.
func yamlDocs(t *testing.T, path string) []map[string]any {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	var docs []map[string]any
	for {
		var d map[string]any
		err := dec.Decode(&d)
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if d != nil {
			docs = append(docs, d)
		}
	}
}

// dig walks maps and lists by key or index; nil when absent.
func dig(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

func list(v any) []any {
	l, _ := v.([]any)
	return l
}

func str(v any) string {
	if v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

func num(v any) int {
	n, _ := strconv.Atoi(str(v))
	return n
}

// envFile reads KEY=VALUE lines (comments and blanks skipped).
func envFile(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s: not KEY=VALUE: %q", path, line)
		}
		out[k] = v
	}
	return out
}

// k8sObjects are the deploy/ manifests by "Kind/name".
func k8sObjects(t *testing.T) map[string]map[string]any {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(repo, "deploy", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]any{}
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" || filepath.Base(f) == "mcp.yaml" {
			continue
		}
		for _, d := range yamlDocs(t, f) {
			out[str(d["kind"])+"/"+str(dig(d, "metadata", "name"))] = d
		}
	}
	return out
}

func kustomization(t *testing.T) map[string]any {
	t.Helper()
	return yamlDocs(t, filepath.Join(repo, "deploy", "kustomization.yaml"))[0]
}

// pinned reports whether an image reference names a tag other than
// latest, or a digest.
func pinned(image string) bool {
	if strings.Contains(image, "@sha256:") {
		return true
	}
	i := strings.LastIndex(image, ":")
	if i < 0 || strings.Contains(image[i:], "/") {
		return false
	}
	return image[i+1:] != "" && image[i+1:] != "latest"
}

func TestDeployKustomization(t *testing.T) {
	k := kustomization(t)
	objs := k8sObjects(t)
	for _, r := range list(k["resources"]) {
		if _, err := os.Stat(filepath.Join(repo, "deploy", str(r))); err != nil {
			t.Errorf("resource %s: %v", r, err)
		}
	}
	if dig(k, "generatorOptions", "disableNameSuffixHash") == true {
		t.Error("generatorOptions.disableNameSuffixHash: changed settings would not roll the pods")
	}
	gens := map[string]map[string]any{}
	for _, kind := range []string{"configMapGenerator", "secretGenerator"} {
		for _, g := range list(k[kind]) {
			m := g.(map[string]any)
			if m["behavior"] != nil || dig(m, "options", "disableNameSuffixHash") == true {
				t.Errorf("%s %s: no hash suffix", kind, m["name"])
			}
			gens[str(m["name"])] = m
		}
	}
	for _, name := range []string{"bobbin-config", "bobbin-mcp", "bobbin-redis", "bobbin-secrets"} {
		if gens[name] == nil {
			t.Errorf("no generator for %s", name)
		}
	}
	// Secrets come from an untracked file, never from a tracked manifest.
	if got := list(dig(gens["bobbin-secrets"], "envs")); len(got) != 1 || got[0] != "secrets.env" {
		t.Errorf("bobbin-secrets from %v, want [secrets.env]", got)
	}
	for key, o := range objs {
		if strings.HasPrefix(key, "Secret/") {
			t.Errorf("deploy/ tracks %s: kubectl apply -k would overwrite the real one", key)
		}
		_ = o
	}
	if !ignored(t, ".gitignore", "deploy/secrets.env") || !ignored(t, ".dockerignore", "deploy/secrets.env") {
		t.Error("deploy/secrets.env is not in .gitignore and .dockerignore")
	}
	example := envFile(t, filepath.Join(repo, "deploy", "secrets.env.example"))
	for _, want := range []string{"SLACK_BOT_TOKEN", "SLACK_APP_TOKEN", "LLM_API_KEY", "SECRET_KEY", "REDIS_PASSWORD", "REDIS_URL"} {
		if _, ok := example[want]; !ok {
			t.Errorf("secrets.env.example lacks %s", want)
		}
	}
	settings := envFile(t, filepath.Join(repo, "deploy", "config.env"))
	for _, secret := range []string{"REDIS_URL", "SLACK_BOT_TOKEN", "SLACK_APP_TOKEN", "LLM_API_KEY", "SECRET_KEY"} {
		if _, ok := settings[secret]; ok {
			t.Errorf("config.env (a ConfigMap) sets %s, which belongs in secrets.env", secret)
		}
	}
	// Every variable of config.env and secrets.env is one the bot reads
	// (REDIS_PASSWORD is Redis's own).
	known := mapValues(envFields(reflect.TypeFor[config]()))
	for key := range settings {
		if !slices.Contains(known, key) {
			t.Errorf("config.env sets %s, which the bot does not read", key)
		}
	}
	for key := range example {
		if !slices.Contains(known, key) && key != "REDIS_PASSWORD" {
			t.Errorf("secrets.env.example sets %s, which the bot does not read", key)
		}
	}
	// Every key a workload takes from the Secret is in the template.
	for key, o := range objs {
		for _, c := range containers(o) {
			for _, e := range list(c["env"]) {
				if ref := dig(e, "valueFrom", "secretKeyRef"); ref != nil {
					if _, ok := example[str(dig(ref, "key"))]; !ok {
						t.Errorf("%s takes %s from the Secret; secrets.env.example lacks it", key, dig(ref, "key"))
					}
				}
			}
		}
	}

	// The bot's image: set by the kustomization, pinned.
	imgs := list(k["images"])
	if len(imgs) != 1 {
		t.Fatalf("images = %v, want one entry for the bot", imgs)
	}
	img := imgs[0].(map[string]any)
	tag, digest := str(img["newTag"]), str(img["digest"])
	if (tag == "" || tag == "latest") && digest == "" {
		t.Errorf("images: newTag %q: pin a tag or a digest", tag)
	}
	bot := containers(objs["Deployment/bobbin"])
	if len(bot) == 0 || str(bot[0]["image"]) != str(img["name"]) {
		t.Errorf("the Deployment's image is not the one kustomization.yaml rewrites (%v)", img["name"])
	}
	for key, o := range objs {
		for _, c := range containers(o) {
			if image := str(c["image"]); image != str(img["name"]) && !pinned(image) {
				t.Errorf("%s: image %s is not pinned", key, image)
			}
		}
	}
}

func ignored(t *testing.T, file, path string) bool {
	raw, err := os.ReadFile(filepath.Join(repo, file))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(raw), "\n") {
		if strings.TrimSpace(l) == path || strings.TrimSpace(l) == "/"+path {
			return true
		}
	}
	return false
}

func mapValues(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// podSpec and containers of a workload (nil for other kinds).
func podSpec(o map[string]any) map[string]any {
	s, _ := dig(o, "spec", "template", "spec").(map[string]any)
	return s
}

func containers(o map[string]any) []map[string]any {
	var out []map[string]any
	for _, c := range list(dig(podSpec(o), "containers")) {
		out = append(out, c.(map[string]any))
	}
	return out
}

// TestDeployPods: probes, hardening, memory, shutdown and the socket
// budget of the workloads.
func TestDeployPods(t *testing.T) {
	objs := k8sObjects(t)
	config := envFile(t, filepath.Join(repo, "deploy", "config.env"))
	workloads := 0
	for key, o := range objs {
		spec := podSpec(o)
		if spec == nil {
			continue
		}
		workloads++
		if spec["automountServiceAccountToken"] != false {
			t.Errorf("%s: automountServiceAccountToken is not false", key)
		}
		sc := spec["securityContext"]
		if dig(sc, "runAsNonRoot") != true || num(dig(sc, "runAsUser")) == 0 || dig(sc, "seccompProfile", "type") != "RuntimeDefault" {
			t.Errorf("%s: pod securityContext %v: want runAsNonRoot, a non-zero runAsUser, seccomp RuntimeDefault", key, sc)
		}
		for _, c := range containers(o) {
			name := key + "/" + str(c["name"])
			csc := c["securityContext"]
			if dig(csc, "allowPrivilegeEscalation") != false || dig(csc, "readOnlyRootFilesystem") != true ||
				!slices.Contains(list(dig(csc, "capabilities", "drop")), any("ALL")) {
				t.Errorf("%s: securityContext %v: want no privilege escalation, a read-only root, all capabilities dropped", name, csc)
			}
			if dig(c, "resources", "limits", "memory") == nil {
				t.Errorf("%s: no memory limit", name)
			}
			for _, p := range []string{"livenessProbe", "readinessProbe", "startupProbe"} {
				if probe := c[p]; probe != nil && num(dig(probe, "timeoutSeconds")) < 2 {
					t.Errorf("%s: %s timeoutSeconds %v: below what its handler may take", name, p, dig(probe, "timeoutSeconds"))
				}
			}
		}
	}
	if workloads != 2 {
		t.Errorf("%d workloads, want the bot's Deployment and Redis's StatefulSet", workloads)
	}

	d := objs["Deployment/bobbin"]
	c := containers(d)[0]
	// /readyz pings Redis for up to readyTimeout: the probe must outwait it.
	if path := str(dig(c, "readinessProbe", "httpGet", "path")); path != "/readyz" {
		t.Errorf("readiness probe path %q, want /readyz", path)
	}
	if to := time.Duration(num(dig(c, "readinessProbe", "timeoutSeconds"))) * time.Second; to <= readyTimeout {
		t.Errorf("readiness probe timeout %v, want more than the handler's %v", to, readyTimeout)
	}
	// A pod that cannot open a socket (revoked token, Socket Mode off)
	// stays unready; it must not be restarted for it.
	for _, p := range []string{"startupProbe", "livenessProbe"} {
		if path := str(dig(c, p, "httpGet", "path")); path != "/healthz" {
			t.Errorf("%s path %q, want /healthz (readiness failures must not restart the pod)", p, path)
		}
	}
	gomem := false
	for _, e := range list(c["env"]) {
		if dig(e, "name") == "GOMEMLIMIT" {
			ref := dig(e, "valueFrom", "resourceFieldRef")
			gomem = dig(ref, "resource") == "limits.memory" && dig(ref, "containerName") == c["name"]
		}
	}
	if !gomem {
		t.Error("GOMEMLIMIT is not taken from the container's memory limit")
	}
	grace, err := time.ParseDuration(config["SHUTDOWN_GRACE"])
	if err != nil {
		t.Fatalf("config.env SHUTDOWN_GRACE: %v", err)
	}
	if tg := time.Duration(num(dig(d, "spec", "template", "spec", "terminationGracePeriodSeconds"))) * time.Second; tg < grace+5*time.Second {
		t.Errorf("terminationGracePeriodSeconds %v: want at least SHUTDOWN_GRACE %v + 5s", tg, grace)
	}
	// Socket budget (README.md): (replicas + surge) × SOCKET_CONNECTIONS ≤ 10.
	replicas, surge := num(dig(d, "spec", "replicas")), num(dig(d, "spec", "strategy", "rollingUpdate", "maxSurge"))
	sockets := num(config["SOCKET_CONNECTIONS"])
	if replicas < 2 || sockets < 1 || (replicas+surge)*sockets > 10 {
		t.Errorf("(replicas %d + surge %d) × SOCKET_CONNECTIONS %d = %d: Slack allows 10", replicas, surge, sockets, (replicas+surge)*sockets)
	}
	// MCP_CONFIG is the file the ConfigMap volume mounts.
	mcpPath := config["MCP_CONFIG"]
	mounted := false
	for _, m := range list(c["volumeMounts"]) {
		if dig(m, "name") == "mcp" && str(dig(m, "mountPath"))+"/mcp.yaml" == mcpPath {
			mounted = true
		}
	}
	if !mounted {
		t.Errorf("MCP_CONFIG=%s is not where the bobbin-mcp ConfigMap is mounted", mcpPath)
	}
}

// redisConf reads deploy/redis.conf's directives.
func redisConf(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repo, "deploy", "redis.conf"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, l := range strings.Split(string(raw), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		k, v, _ := strings.Cut(l, " ")
		out[k] = strings.TrimSpace(v)
	}
	return out
}

// bytesOf parses Redis ("768mb") and Kubernetes ("1Gi") memory sizes.
func bytesOf(t *testing.T, s string) int64 {
	t.Helper()
	m := regexp.MustCompile(`^(\d+)\s*([a-zA-Z]*)$`).FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		t.Fatalf("not a size: %q", s)
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	unit := map[string]int64{"": 1, "b": 1, "k": 1000, "kb": 1024, "m": 1000 * 1000, "mb": 1 << 20, "g": 1000 * 1000 * 1000, "gb": 1 << 30,
		"ki": 1 << 10, "mi": 1 << 20, "gi": 1 << 30}[strings.ToLower(m[2])]
	if unit == 0 {
		t.Fatalf("unknown unit in %q", s)
	}
	return n * unit
}

func TestDeployRedis(t *testing.T) {
	conf := redisConf(t)
	if conf["maxmemory-policy"] != "noeviction" || conf["appendonly"] != "yes" || conf["maxmemory"] == "" {
		t.Errorf("redis.conf: maxmemory %q, policy %q, appendonly %q; want a maxmemory, noeviction, yes",
			conf["maxmemory"], conf["maxmemory-policy"], conf["appendonly"])
	}
	if _, ok := conf["requirepass"]; ok {
		t.Error("redis.conf holds the password; it comes from the Secret")
	}
	objs := k8sObjects(t)
	sts := objs["StatefulSet/bobbin-redis"]
	c := containers(sts)[0]
	limit := bytesOf(t, str(dig(c, "resources", "limits", "memory")))
	if maxmem := bytesOf(t, conf["maxmemory"]); maxmem >= limit*9/10 {
		t.Errorf("maxmemory %s leaves no room below the container limit %v for the AOF rewrite's fork", conf["maxmemory"], dig(c, "resources", "limits", "memory"))
	}
	args := strings.Join(func() []string {
		var s []string
		for _, a := range list(c["args"]) {
			s = append(s, str(a))
		}
		return s
	}(), " ")
	if !strings.Contains(args, "--requirepass $(REDIS_PASSWORD)") {
		t.Errorf("redis args %q: want --requirepass $(REDIS_PASSWORD)", args)
	}
	np := objs["NetworkPolicy/bobbin-redis"]
	if dig(np, "spec", "podSelector", "matchLabels", "app") != "bobbin-redis" ||
		len(list(dig(np, "spec", "ingress"))) != 1 ||
		dig(np, "spec", "ingress", 0, "from", 0, "podSelector", "matchLabels", "app") != "bobbin" ||
		len(list(dig(np, "spec", "ingress", 0, "from"))) != 1 {
		t.Errorf("NetworkPolicy bobbin-redis does not limit Redis to the bot's pods: %v", dig(np, "spec"))
	}
	compose := yamlDocs(t, filepath.Join(repo, "docker-compose.yml"))[0]
	if ci, ki := str(dig(compose, "services", "redis", "image")), str(c["image"]); ci != ki || !pinned(ki) {
		t.Errorf("Redis image: compose %q, Kubernetes %q: want one pinned version", ci, ki)
	}
	// Comments must match the code: the bot has no Cluster client yet.
	raw, _ := os.ReadFile(filepath.Join(repo, "deploy", "redis.yaml"))
	if strings.Contains(string(raw), "Cluster works") {
		t.Error("redis.yaml says Cluster works; the bot has no Cluster client yet")
	}
}

func TestDeployCompose(t *testing.T) {
	compose := yamlDocs(t, filepath.Join(repo, "docker-compose.yml"))[0]
	bot := dig(compose, "services", "bot")
	if str(dig(bot, "env_file")) != ".env" && str(dig(bot, "env_file", 0)) != ".env" {
		t.Errorf("bot env_file = %v, want .env", dig(bot, "env_file"))
	}
	if _, err := os.Stat(filepath.Join(repo, ".env.example")); err != nil {
		t.Error(".env.example is missing")
	}
	if !ignored(t, ".gitignore", ".env") || !ignored(t, ".dockerignore", ".env") {
		t.Error(".env is not in .gitignore and .dockerignore")
	}
	for _, p := range []string{".git", "node_modules", "**/node_modules"} {
		if !ignored(t, ".dockerignore", p) {
			t.Errorf(".dockerignore lacks %s", p)
		}
	}
	for _, p := range list(dig(bot, "ports")) {
		if s := str(p); !strings.HasPrefix(s, "127.0.0.1:") && !strings.HasPrefix(s, "${BOBBIN_HTTP_BIND:-127.0.0.1}:") {
			t.Errorf("bot port %q is published on every interface by default", s)
		}
	}
	if ports := dig(compose, "services", "redis", "ports"); ports != nil {
		t.Errorf("Redis is published (%v); only the bot should reach it", ports)
	}
	mcpPath := str(dig(bot, "environment", "MCP_CONFIG"))
	mounted := false
	for _, v := range list(dig(bot, "volumes")) {
		parts := strings.Split(str(v), ":")
		if len(parts) >= 2 && parts[0] == "./deploy/mcp.yaml" && parts[1] == mcpPath {
			mounted = true
		}
	}
	if mcpPath == "" || !mounted {
		t.Errorf("MCP_CONFIG=%q is not the mounted deploy/mcp.yaml", mcpPath)
	}
	if !strings.Contains(str(dig(bot, "environment", "REDIS_URL")), "${REDIS_PASSWORD}") {
		t.Error("the bot's REDIS_URL does not carry the Redis password")
	}
	if grace := str(dig(bot, "stop_grace_period")); grace == "" {
		t.Error("no stop_grace_period for the bot")
	} else if d, err := time.ParseDuration(grace); err != nil || d <= 25*time.Second {
		t.Errorf("stop_grace_period %s: want more than SHUTDOWN_GRACE 25s", grace)
	}
	for _, svc := range []string{"bot", "redis"} {
		s := dig(compose, "services", svc)
		if dig(s, "read_only") != true || !slices.Contains(list(dig(s, "cap_drop")), any("ALL")) {
			t.Errorf("compose %s: want read_only and cap_drop ALL", svc)
		}
	}
}

// TestDeployMCPConfig: the example MCP file loads, and so do its examples
// once uncommented.
func TestDeployMCPConfig(t *testing.T) {
	path := filepath.Join(repo, "deploy", "mcp.yaml")
	if _, err := mcp.LoadConfig(path); err != nil {
		t.Fatalf("deploy/mcp.yaml: %v", err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	examples := 0
	for _, l := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(l, "  # "); ok {
			l = "  " + rest
			if strings.HasPrefix(rest, "- name:") {
				examples++
			}
		}
		out = append(out, l)
	}
	un := filepath.Join(t.TempDir(), "mcp.yaml")
	if err := os.WriteFile(un, []byte(strings.Join(out, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := mcp.LoadConfig(un)
	if err != nil {
		t.Fatalf("deploy/mcp.yaml's examples, uncommented: %v", err)
	}
	if len(cfg.Servers) != examples || examples < 2 {
		t.Errorf("%d servers from %d examples", len(cfg.Servers), examples)
	}
}

// TestDeployKustomizeBuild renders deploy/ with kubectl's kustomize when
// it is installed, as kubectl apply -k would.
func TestDeployKustomizeBuild(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl not on PATH")
	}
	dir := filepath.Join(t.TempDir(), "deploy")
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(repo, "deploy"))); err != nil {
		t.Fatal(err)
	}
	_ = os.Remove(filepath.Join(dir, "secrets.env"))
	if out, err := exec.Command(kubectl, "kustomize", dir).CombinedOutput(); err == nil {
		t.Fatalf("kustomize built without secrets.env:\n%s", out)
	}
	example, err := os.ReadFile(filepath.Join(dir, "secrets.env.example"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "secrets.env"), example, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(kubectl, "kustomize", dir).Output()
	if err != nil {
		t.Fatalf("kubectl kustomize: %v", err)
	}
	s := string(out)
	for _, re := range []string{
		`name: bobbin-config-[a-z0-9]{10}\n`, `name: bobbin-secrets-[a-z0-9]{10}\n`,
		`name: bobbin-mcp-[a-z0-9]{10}\n`, `name: bobbin-redis-[a-z0-9]{10}\n`,
		`image: registry\.example\.com/bobbin:`,
	} {
		if !regexp.MustCompile(re).MatchString(s) {
			t.Errorf("rendered manifests lack %s", re)
		}
	}
	for _, ref := range regexp.MustCompile(`name: (bobbin-(?:config|secrets|mcp))\n`).FindAllStringSubmatch(s, -1) {
		t.Errorf("a reference to %s was not rewritten to the generated name", ref[1])
	}
}
