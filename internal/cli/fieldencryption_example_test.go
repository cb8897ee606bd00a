package cli_test

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/straitgw/strait/internal/testkit"
)

// The example, the addresses its header promises the scripts that drive it
// (the broker's and the gateway's are those of examples/passthrough.yaml),
// and the header's commands in the order it gives them.
const (
	fieldExample  = "examples/field-encryption.yaml"
	fieldRegistry = "127.0.0.1:8081"
	fieldPlainSSN = "123-45-6789"
	// gcmTagLen is what AES-GCM adds to each encrypted value.
	gcmTagLen = 16
)

var fieldExampleCommands = []string{
	"strait keys create --vault examples/vault demo-kek",
	"strait broker",
	"strait registry",
	"strait run -c " + fieldExample,
	"echo '",
	"kcat -b " + gatewayAddr + " -t pii-json-people -C -e",
	"kcat -b 127.0.0.1:9092  -t pii-json-people -C -e",
}

// TestFieldEncryptionExample runs examples/field-encryption.yaml as its
// header says, command by command, word for word, in a working directory
// holding the example as it is (so its vault, examples/vault, is created
// there and not in the checkout): the record it produces comes back as
// produced through the gateway and holds ciphertext in ssn at the broker.
// Then an Avro record to a pii-avro topic, with a schema registered in the
// registry, has its ssn and its PII-tagged field encrypted and comes back
// whole; and a JSON record without ssn is refused, kcat reporting it.
func TestFieldEncryptionExample(t *testing.T) {
	needKcat(t)
	dir := fieldExampleDir(t)
	checkFieldExampleAddrs(t, filepath.Join(dir, fieldExample))
	needExamplePorts(t, slices.Concat(brokerAddrs, []string{fieldRegistry, gatewayAddr, adminAddr}, nodeAddrs))
	cmds := fieldExampleHeader(t, filepath.Join(dir, fieldExample))

	if out, err := exampleShell(dir, cmds[0]).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", cmds[0], err, out)
	}
	startExampleCommand(t, dir, cmds[1]).waitListening(brokerAddrs...)
	startExampleCommand(t, dir, cmds[2]).waitListening(fieldRegistry)
	gw := startExampleCommand(t, dir, cmds[3])
	gw.waitListening(slices.Concat([]string{gatewayAddr, adminAddr}, nodeAddrs)...)

	produced := regexp.MustCompile(`^echo '([^']*)'`).FindStringSubmatch(cmds[4])[1]
	exampleRun(t, dir, cmds[4])
	if got := exampleRun(t, dir, cmds[5]); got != produced+"\n" {
		t.Errorf("%s printed %q, want the record as produced: %q", cmds[5], got, produced+"\n")
	}
	stored := exampleRun(t, dir, cmds[6])
	checkStoredJSON(t, stored, produced)

	t.Run("avro", func(t *testing.T) { fieldExampleAvro(t, gw) })
	t.Run("refused", func(t *testing.T) { fieldExampleRefused(t, dir, gw) })
}

// checkStoredJSON checks the broker's copy of the example's JSON record:
// one line, every field as produced but ssn, which holds base64url
// ciphertext, and no plaintext ssn anywhere.
func checkStoredJSON(t *testing.T, stored, produced string) {
	t.Helper()
	if strings.Contains(stored, fieldPlainSSN) {
		t.Errorf("the broker holds the plaintext ssn: %q", stored)
	}
	var got, want map[string]any
	if err := json.Unmarshal([]byte(stored), &got); err != nil {
		t.Fatalf("the broker's record is not one JSON object (%v): %q", err, stored)
	}
	if err := json.Unmarshal([]byte(produced), &want); err != nil {
		t.Fatal(err)
	}
	ssn, _ := got["ssn"].(string)
	checkCiphertext(t, "stored ssn", ssn, len(want["ssn"].(string)))
	got["ssn"] = want["ssn"]
	if !equalJSON(got, want) {
		t.Errorf("the broker's record is %q; but for ssn, want it as produced: %q", stored, produced)
	}
}

// checkCiphertext checks that s is base64url of a random-mode envelope of
// a plaintext of n bytes: its ciphertext and tag.
func checkCiphertext(t *testing.T, what, s string, n int) {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(raw) != n+gcmTagLen {
		t.Errorf("%s is %q, want base64url of %d bytes (%d of plaintext and a tag): %v", what, s, n+gcmTagLen, n, err)
	}
}

func equalJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// fieldAvroSchema is the schema of the Avro record: ssn by path, email by
// its PII tag, as the example's pii-avro* rule selects them.
const fieldAvroSchema = `{"type":"record","name":"Person","namespace":"example","fields":[` +
	`{"name":"id","type":"string"},{"name":"ssn","type":"string"},` +
	`{"name":"email","type":"string","confluent:tags":["PII"]},{"name":"visits","type":"long"}]}`

// fieldExampleAvro registers fieldAvroSchema for pii-avro-x, produces one
// record in the Confluent wire format with kcat through the gateway, and
// reads it back through the gateway (as produced, byte for byte) and from
// the broker (ssn and email encrypted, the rest as produced).
func fieldExampleAvro(t *testing.T, gw *proc) {
	const topic = "pii-avro-x"
	id := registerSchema(t, topic+"-value", fieldAvroSchema)
	fields := []string{"a1", fieldPlainSSN, "ann@example.com"}
	value := binary.BigEndian.AppendUint32([]byte{0}, uint32(id))
	for _, s := range fields {
		value = appendAvroString(value, s)
	}
	value = binary.AppendVarint(value, 42)
	file := filepath.Join(t.TempDir(), "record.avro")
	if err := os.WriteFile(file, value, 0o600); err != nil {
		t.Fatal(err)
	}
	// kcat sends each file it is given as one record.
	mustKcat(t, "", "-b", gatewayAddr, "-t", topic, "-P", file)

	if got := mustKcat(t, "", "-b", gatewayAddr, "-t", topic, "-C", "-e", "-q", "-f", "%s"); got != string(value) {
		t.Errorf("through the gateway: %q, want the record as produced: %q", got, value)
	}
	stored := []byte(mustKcat(t, "", "-b", brokerAddrs[0], "-t", topic, "-C", "-e", "-q", "-f", "%s"))
	for _, s := range fields[1:] {
		if bytes.Contains(stored, []byte(s)) {
			t.Errorf("the broker holds a plaintext value of a field to encrypt (%d bytes): %q", len(s), stored)
		}
	}
	if !bytes.HasPrefix(stored, value[:5]) {
		t.Fatalf("the broker's record %q does not start with the produced prefix %x", stored, value[:5])
	}
	rest := stored[5:]
	var got []string
	for range fields {
		var s string
		var ok bool
		if s, rest, ok = readAvroString(rest); !ok {
			t.Fatalf("the broker's record %q does not decode with the schema", stored)
		}
		got = append(got, s)
	}
	visits, n := binary.Varint(rest)
	if n <= 0 || n != len(rest) || visits != 42 {
		t.Errorf("the broker's record ends in %x, want visits 42 and nothing after", rest)
	}
	if got[0] != fields[0] {
		t.Errorf("stored id is %q, want %q as produced", got[0], fields[0])
	}
	checkCiphertext(t, "stored ssn", got[1], len(fields[1]))
	checkCiphertext(t, "stored email (tagged PII)", got[2], len(fields[2]))
	if t.Failed() {
		t.Logf("gateway log:\n%s", gw.stderr)
	}
}

func appendAvroString(b []byte, s string) []byte {
	return append(binary.AppendVarint(b, int64(len(s))), s...)
}

func readAvroString(b []byte) (string, []byte, bool) {
	n, k := binary.Varint(b)
	if k <= 0 || n < 0 || n > int64(len(b)-k) {
		return "", nil, false
	}
	return string(b[k : k+int(n)]), b[k+int(n):], true
}

// registerSchema registers an Avro schema under subject in the example's
// registry and returns its id.
func registerSchema(t *testing.T, subject, schema string) int {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"schema": schema})
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Post("http://"+fieldRegistry+"/subjects/"+subject+"/versions", "application/vnd.schemaregistry.v1+json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		ID int `json:"id"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK || out.ID <= 0 {
		t.Fatalf("registering %s: HTTP %d, id %d, %v", subject, resp.StatusCode, out.ID, err)
	}
	return out.ID
}

// fieldExampleRefused produces a JSON record without ssn to pii-json-x, as
// the example's header line does with its record: kcat must report the
// refusal, the gateway log it naming the field, and the broker hold
// nothing.
func fieldExampleRefused(t *testing.T, dir string, gw *proc) {
	line := `echo '{"id":"a2","status":"ACTIVE"}' | kcat -b ` + gatewayAddr + ` -t pii-json-x -P`
	out, err := exampleShell(dir, line).CombinedOutput()
	if err == nil {
		t.Errorf("%s: exit 0, want kcat to fail", line)
	}
	if !strings.Contains(string(out), "Delivery failed for message: Broker: Broker failed to validate record") {
		t.Errorf("%s printed %q, want librdkafka's delivery error for INVALID_RECORD", line, out)
	}
	refusal := regexp.MustCompile(`(?m)^.*level=WARN msg="field-encryption: refused a produce to a partition; none of its records went to the broker" .* topic=pii-json-x partition=\d+ error_code=INVALID_RECORD err="record at offset 0: value: field \\"ssn\\": is missing"$`)
	if !logged(gw, refusal, 5*time.Second) {
		t.Errorf("the gateway logged no refusal matching %s", refusal)
	}
	if got := mustKcat(t, "", "-b", brokerAddrs[0], "-t", "pii-json-x", "-C", "-e", "-q"); got != "" {
		t.Errorf("the broker holds %q in pii-json-x, want nothing", got)
	}
}

// logged waits until p's stderr has a line matching re.
func logged(p *proc, re *regexp.Regexp, timeout time.Duration) bool {
	for deadline := time.Now().Add(timeout); ; time.Sleep(50 * time.Millisecond) {
		if re.MatchString(p.stderr.String()) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// fieldExampleDir returns a working directory holding the example, copied
// byte for byte to where its header expects it.
func fieldExampleDir(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(moduleRoot, fieldExample))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(fieldExample)), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, fieldExample), b, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// fieldExampleHeader returns the commands of the example's header, and
// fails unless they are the ones this test knows how to follow.
func fieldExampleHeader(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cmds []string
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "#") {
			break // the header ends at the first line that is not a comment
		}
		cmd := strings.TrimSpace(strings.TrimPrefix(line, "#"))
		if strings.HasPrefix(cmd, "strait ") || strings.HasPrefix(cmd, "kcat ") || strings.HasPrefix(cmd, "echo ") {
			cmds = append(cmds, cmd)
		}
	}
	ok := len(cmds) == len(fieldExampleCommands)
	for i := range min(len(cmds), len(fieldExampleCommands)) {
		ok = ok && strings.HasPrefix(cmds[i], fieldExampleCommands[i])
	}
	if !ok || !strings.Contains(cmds[4], "| kcat -b "+gatewayAddr+" -t pii-json-people -P") || !strings.Contains(cmds[4], fieldPlainSSN) {
		t.Fatalf("%s's header gives the commands\n  %s\nwant ones starting\n  %s\n(the record piped to kcat -P holding ssn %s): update the test with the example",
			fieldExample, strings.Join(cmds, "\n  "), strings.Join(fieldExampleCommands, "\n  "), fieldPlainSSN)
	}
	return cmds
}

// checkFieldExampleAddrs fails unless the example listens and connects
// where its header says, which is where scripts drive it.
func checkFieldExampleAddrs(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Admin struct {
			Listen string `yaml:"listen"`
		} `yaml:"admin"`
		Clusters map[string]struct {
			Bootstrap []string `yaml:"bootstrap_servers"`
		} `yaml:"clusters"`
		VirtualClusters []struct {
			Listen  string `yaml:"listen"`
			Filters []struct {
				Config struct {
					Registry struct {
						URL string `yaml:"url"`
					} `yaml:"registry"`
				} `yaml:"config"`
			} `yaml:"filters"`
		} `yaml:"virtual_clusters"`
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatalf("%s: %v", fieldExample, err)
	}
	got := []string{cfg.Admin.Listen, fmt.Sprint(cfg.Clusters["local"].Bootstrap)}
	for _, vc := range cfg.VirtualClusters {
		got = append(got, vc.Listen)
		for _, f := range vc.Filters {
			got = append(got, f.Config.Registry.URL)
		}
	}
	want := []string{adminAddr, "[" + brokerAddrs[0] + "]", gatewayAddr, "http://" + fieldRegistry}
	if !slices.Equal(got, want) {
		t.Fatalf("%s: admin, cluster, gateway and registry at %q, want %q as its header and the scripts that drive it say", fieldExample, got, want)
	}
}

// needExamplePorts waits a little for addrs to be free (a test before may
// still be stopping), then fails: the example is run as written, on its
// own ports, never moved to others.
func needExamplePorts(t *testing.T, addrs []string) {
	t.Helper()
	deadline := time.Now().Add(fixedPortWait)
	for {
		var busy []string
		for _, a := range addrs {
			if !canListen(a) {
				busy = append(busy, a)
			}
		}
		if len(busy) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is run as written, on its own ports, but %v are in use (another broker, registry or gateway running?): stop what holds them", fieldExample, busy)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// exampleShell is a header line run by sh in dir, with the strait under
// test first on the PATH.
func exampleShell(dir, line string) *exec.Cmd {
	cmd := exec.Command("sh", "-c", line)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(straitBin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// exampleRun runs a header line that finishes (kcat) and returns its
// stdout; it fails the test unless the line exits 0 within kcatTimeout.
func exampleRun(t *testing.T, dir, line string) string {
	t.Helper()
	cmd := exampleShell(dir, line)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	timer := time.AfterFunc(kcatTimeout, func() { cmd.Process.Kill() })
	defer timer.Stop()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", line, err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// startExampleCommand starts a header line that runs until stopped
// (strait broker, registry, run), exec'd by sh so that the signals of
// stop reach strait itself.
func startExampleCommand(t *testing.T, dir, line string) *proc {
	t.Helper()
	p := &proc{t: t, name: line, stdout: &testkit.SyncBuffer{}, stderr: &testkit.SyncBuffer{}, done: make(chan struct{})}
	p.cmd = exampleShell(dir, "exec "+line)
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("%s (%s)\n--- stdout:\n%s--- stderr:\n%s", p.name, p.state(), p.stdout, p.stderr)
		}
	})
	return p
}
