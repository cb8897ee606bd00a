package cli_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/straitgw/strait/internal/kms/awskms/localkms"
)

// The example and what its header promises: the commands, in order, and
// the record it produces.
const awsExample = "examples/encryption-aws.yaml"

var awsExampleCommands = []string{
	"strait keys create --kms aws alias/demo-kek",
	"strait broker",
	"strait run -c " + awsExample,
	"echo 'k1:card 4111-1111-1111-1111' | kcat -b " + gatewayAddr + " -t secure-orders -P -K:",
	"kcat -b " + gatewayAddr + " -t secure-orders -C -e",
	"kcat -b 127.0.0.1:9092  -t secure-orders -C -e",
	"strait keys create --kms aws --endpoint $STRAIT_AWS_KMS_ENDPOINT alias/demo-kek",
}

// TestEncryptionAWSExample runs examples/encryption-aws.yaml as its header
// says, against a local KMS server (STRAIT_AWS_KMS_ENDPOINT, region and
// credentials in the standard AWS variables, as the header's second part
// sets them): the KEK is made with the header's own `strait keys create`
// line, the record produced through the gateway is ciphertext at the
// broker and plaintext through the gateway, and the gateway counts its
// AWS KMS calls. With STRAIT_AWS_KMS_ENDPOINT unset the example is still a
// valid config (AWS's own endpoint).
func TestEncryptionAWSExample(t *testing.T) {
	needKcat(t)
	checkAWSExampleConfig(t)
	cmds := awsExampleHeader(t)

	// Unset: the endpoint is AWS's own, and the config is valid as it is.
	t.Setenv("STRAIT_AWS_KMS_ENDPOINT", "") // restored at the end
	os.Unsetenv("STRAIT_AWS_KMS_ENDPOINT")
	t.Setenv("AWS_REGION", localkms.Region)
	if code, stdout, stderr := run(t, "validate", "-c", filepath.Join(moduleRoot, awsExample)); code != 0 {
		t.Fatalf("strait validate with STRAIT_AWS_KMS_ENDPOINT unset: exit %d\n%s%s", code, stdout, stderr)
	}

	s := localkms.Start(t)
	t.Setenv("STRAIT_AWS_KMS_ENDPOINT", s.Endpoint)
	t.Setenv("AWS_ACCESS_KEY_ID", localkms.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", localkms.SecretKey)
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	needExamplePorts(t, slices.Concat(brokerAddrs, []string{gatewayAddr, adminAddr}, nodeAddrs))
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "examples"), 0o700); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(moduleRoot, awsExample))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, awsExample), b, 0o600); err != nil {
		t.Fatal(err)
	}

	created := exampleRun(t, dir, cmds[6])
	if !strings.Contains(created, "created alias/demo-kek") {
		t.Errorf("%s printed %q", cmds[6], created)
	}
	list := exampleRun(t, dir, "strait keys list --kms aws --endpoint $STRAIT_AWS_KMS_ENDPOINT")
	if !strings.Contains(list, "alias/demo-kek") || !strings.Contains(list, "Enabled") {
		t.Errorf("strait keys list --kms aws printed %q", list)
	}
	startExampleCommand(t, dir, cmds[1]).waitListening(brokerAddrs...)
	gw := startExampleCommand(t, dir, cmds[2])
	gw.waitListening(slices.Concat([]string{gatewayAddr, adminAddr}, nodeAddrs)...)

	exampleRun(t, dir, cmds[3])
	if got := exampleRun(t, dir, cmds[4]); got != "card 4111-1111-1111-1111\n" {
		t.Errorf("%s printed %q, want the record as produced", cmds[4], got)
	}
	stored := exampleRun(t, dir, cmds[5])
	if strings.Contains(stored, "4111") {
		t.Errorf("the broker holds %q: want ciphertext", stored)
	}
	// Counted by offset: the ciphertext itself may hold a newline byte.
	if offsets := mustKcat(t, "", "-b", brokerAddrs[0], "-t", "secure-orders", "-C", "-e", "-q", "-f", `%o\n`); offsets != "0\n" {
		t.Errorf("the broker holds records at offsets %q, want one record", offsets)
	}
	_, metrics, err := httpGet("http://" + adminAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := metricSum(metrics, "strait_kms_calls_total", `kms="aws"`, `op="wrap"`, `outcome="ok"`); n < 1 {
		t.Errorf("strait_kms_calls_total{kms=\"aws\",op=\"wrap\",outcome=\"ok\"} = %v, want at least 1", n)
	}
	if t.Failed() {
		t.Logf("gateway log:\n%s", gw.stderr)
	}
}

// checkAWSExampleConfig checks the addresses, KMS and KEK the example
// promises, which scripts may rely on.
func checkAWSExampleConfig(t *testing.T) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(moduleRoot, awsExample))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Admin struct {
			Listen string `yaml:"listen"`
		} `yaml:"admin"`
		VirtualClusters []struct {
			Listen  string `yaml:"listen"`
			Filters []struct {
				Type   string `yaml:"type"`
				Config struct {
					KMS struct {
						Type     string `yaml:"type"`
						Endpoint string `yaml:"endpoint"`
					} `yaml:"kms"`
					Topics         []string `yaml:"topics"`
					KEK            string   `yaml:"kek"`
					EncryptHeaders bool     `yaml:"encrypt_headers"`
				} `yaml:"config"`
			} `yaml:"filters"`
		} `yaml:"virtual_clusters"`
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	if len(cfg.VirtualClusters) != 1 || len(cfg.VirtualClusters[0].Filters) != 1 {
		t.Fatalf("%s: want one virtual cluster with one filter", awsExample)
	}
	vc := cfg.VirtualClusters[0]
	f := vc.Filters[0].Config
	got := []string{cfg.Admin.Listen, vc.Listen, vc.Filters[0].Type, f.KMS.Type, f.KMS.Endpoint, strings.Join(f.Topics, ","), f.KEK}
	want := []string{adminAddr, gatewayAddr, "record-encryption", "aws", "${env:STRAIT_AWS_KMS_ENDPOINT:-}", "secure-*", "alias/demo-kek"}
	if !slices.Equal(got, want) || !f.EncryptHeaders {
		t.Fatalf("%s: %q (encrypt_headers %v), want %q and encrypt_headers, as its issue and the scripts that drive it say",
			awsExample, got, f.EncryptHeaders, want)
	}
}

func awsExampleHeader(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(moduleRoot, awsExample))
	if err != nil {
		t.Fatal(err)
	}
	var cmds []string
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "#") {
			break
		}
		cmd := strings.TrimSpace(strings.TrimPrefix(line, "#"))
		if strings.HasPrefix(cmd, "strait ") || strings.HasPrefix(cmd, "kcat ") || strings.HasPrefix(cmd, "echo ") {
			cmds = append(cmds, cmd)
		}
	}
	ok := len(cmds) == len(awsExampleCommands)
	for i := range min(len(cmds), len(awsExampleCommands)) {
		ok = ok && strings.HasPrefix(cmds[i], awsExampleCommands[i])
	}
	if !ok {
		t.Fatalf("%s's header gives the commands\n  %s\nwant ones starting\n  %s\n(update the test with the example)",
			awsExample, strings.Join(cmds, "\n  "), strings.Join(awsExampleCommands, "\n  "))
	}
	return cmds
}
