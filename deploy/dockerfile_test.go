package deploy_test

import (
	"encoding/json"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// instruction is one Dockerfile instruction with its continuation lines
// joined.
type instruction struct {
	cmd, args string
	line      int
}

// parseDockerfile splits a Dockerfile into stages of instructions. It reads
// what this repository's Dockerfile uses: comments, parser directives,
// backslash continuations.
func parseDockerfile(t *testing.T, path string) [][]instruction {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var stages [][]instruction
	var cur strings.Builder
	start := 0
	for i, line := range strings.Split(string(data), "\n") {
		trimmed := strings.TrimSpace(line)
		if cur.Len() == 0 && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if cur.Len() == 0 {
			start = i + 1
		}
		if strings.HasPrefix(trimmed, "#") {
			continue // a comment inside a continued instruction
		}
		if s, ok := strings.CutSuffix(trimmed, "\\"); ok {
			cur.WriteString(s + " ")
			continue
		}
		cur.WriteString(trimmed)
		cmd, args, _ := strings.Cut(cur.String(), " ")
		in := instruction{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args), line: start}
		cur.Reset()
		if in.cmd == "FROM" {
			stages = append(stages, nil)
		}
		if len(stages) == 0 {
			t.Fatalf("%s:%d: %s before the first FROM", path, in.line, in.cmd)
		}
		stages[len(stages)-1] = append(stages[len(stages)-1], in)
	}
	return stages
}

// TestDockerfile checks the image's invariants by reading the Dockerfile
// (there is no image builder to run it with here): a static, trimmed build
// of ./cmd/strait with a Go no older than go.mod's; a final stage with CA
// certificates and no shell, that runs no command, as a numeric non-root
// user, with strait as the entry point and `run -c /etc/strait/strait.yaml`
// as the default arguments; and the chart runs the pod as that user.
func TestDockerfile(t *testing.T) {
	stages := parseDockerfile(t, "../Dockerfile")
	if len(stages) < 2 {
		t.Fatalf("%d stages: want a build stage and a final stage", len(stages))
	}
	build, final := stages[:len(stages)-1], stages[len(stages)-1]

	// The build.
	var goBuild string
	var builderImage string
	for _, st := range build {
		for _, in := range st {
			if in.cmd == "FROM" && strings.Contains(in.args, "golang:") {
				builderImage = in.args
			}
			if in.cmd == "RUN" && strings.Contains(in.args, "go build") {
				goBuild = in.args
			}
		}
	}
	if goBuild == "" {
		t.Fatal("no RUN ... go build in the build stages")
	}
	for _, want := range []string{"CGO_ENABLED=0", "-trimpath", "./cmd/strait"} {
		if !strings.Contains(goBuild, want) {
			t.Errorf("the go build does not have %s: %s", want, goBuild)
		}
	}
	// The -X targets exist, or the stamp silently does nothing.
	version, err := os.ReadFile("../internal/cli/version.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`-X github.com/straitgw/strait/internal/cli\.(\w+)=`).FindAllStringSubmatch(goBuild, -1) {
		if !regexp.MustCompile(`(?m)^var ` + m[1] + ` = `).Match(version) {
			t.Errorf("the go build stamps cli.%s, which internal/cli/version.go does not declare", m[1])
		}
	}
	// The builder's Go is at least go.mod's go line (major.minor).
	gomod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	modGo := regexp.MustCompile(`(?m)^go (\d+)\.(\d+)`).FindStringSubmatch(string(gomod))
	imgGo := regexp.MustCompile(`golang:(\d+)\.(\d+)`).FindStringSubmatch(builderImage)
	if modGo == nil || imgGo == nil {
		t.Fatalf("cannot compare Go versions: go.mod %q, builder %q", modGo, builderImage)
	}
	atoi := func(s string) int { n, _ := strconv.Atoi(s); return n }
	if atoi(imgGo[1]) < atoi(modGo[1]) || atoi(imgGo[1]) == atoi(modGo[1]) && atoi(imgGo[2]) < atoi(modGo[2]) {
		t.Errorf("builder %s is older than go.mod's go %s.%s", builderImage, modGo[1], modGo[2])
	}

	// The final stage.
	var user, entrypoint, cmd string
	from := final[0].args
	for _, in := range final {
		switch in.cmd {
		case "RUN":
			t.Errorf("line %d: the final stage runs %q: it must need no shell", in.line, in.args)
		case "USER":
			user = in.args
		case "ENTRYPOINT":
			entrypoint = in.args
		case "CMD":
			cmd = in.args
		case "SHELL":
			t.Errorf("line %d: SHELL in the final stage", in.line)
		}
	}
	distroless := strings.Contains(from, "gcr.io/distroless/static")
	if !distroless && from != "scratch" {
		t.Errorf("final stage FROM %s: want gcr.io/distroless/static (no shell) or scratch", from)
	}
	if strings.Contains(from, ":debug") {
		t.Errorf("final stage FROM %s: the debug images have a shell", from)
	}
	if !distroless {
		copiesCA := false
		for _, in := range final {
			if in.cmd == "COPY" && strings.Contains(in.args, "ca-certificates") {
				copiesCA = true
			}
		}
		if !copiesCA {
			t.Error("a scratch image needs CA certificates copied in (TLS to brokers and providers)")
		}
	}
	uid, gid, _ := strings.Cut(user, ":")
	if n, err := strconv.Atoi(uid); err != nil || n == 0 {
		t.Errorf("USER %q: want a numeric non-root user (Kubernetes' runAsNonRoot checks it by number)", user)
	}
	if gid != "" {
		if n, err := strconv.Atoi(gid); err != nil || n == 0 {
			t.Errorf("USER %q: want a numeric non-root group", user)
		}
	}
	var ep, args []string
	if err := json.Unmarshal([]byte(entrypoint), &ep); err != nil || len(ep) != 1 || ep[0] != "/strait" {
		t.Errorf(`ENTRYPOINT %s: want the exec form ["/strait"] (no shell to run a string form)`, entrypoint)
	}
	if err := json.Unmarshal([]byte(cmd), &args); err != nil || strings.Join(args, " ") != "run -c /etc/strait/strait.yaml" {
		t.Errorf(`CMD %s: want ["run", "-c", "/etc/strait/strait.yaml"]`, cmd)
	}

	// The chart runs the pod as the image's user.
	values := readYAML(t, chartDir+"/values.yaml")
	if got := strconv.Itoa(toInt(dig(values, "podSecurityContext", "runAsUser"))); got != uid {
		t.Errorf("the chart's podSecurityContext.runAsUser is %s, the image's USER %s", got, uid)
	}

	// .git stays out of the build context: the commit comes in as COMMIT.
	ignore, err := os.ReadFile("../.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^/?\.git/?$`).Match(ignore) {
		t.Error(".dockerignore does not leave .git out")
	}
}
