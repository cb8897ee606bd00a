package kafkaload

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func writeProps(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "client.properties")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestReadPropertiesKafkaStyle(t *testing.T) {
	p, err := ReadProperties(writeProps(t, `# a Java client's file
bootstrap.servers=127.0.0.1:9093, 127.0.0.1:9094
security.protocol=SASL_SSL
sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="s3cret";
ssl.truststore.type=PEM
ssl.truststore.location=/etc/kafka/ca.pem
ssl.endpoint.identification.algorithm=
acks=1
linger.ms=5
batch.size=65536
compression.type=lz4
enable.idempotence=false
`))
	if err != nil {
		t.Fatal(err)
	}
	s := p.Security
	if !s.TLS || s.Mechanism != "SCRAM-SHA-512" || s.Username != "alice" || s.Password != "s3cret" ||
		s.CAFile != "/etc/kafka/ca.pem" || !s.SkipHostnameCheck {
		t.Errorf("security %+v", s)
	}
	if strings.Join(p.Bootstrap, ",") != "127.0.0.1:9093,127.0.0.1:9094" || p.Acks != "1" || *p.Linger != 5*time.Millisecond ||
		p.BatchBytes != 65536 || p.Compression != "lz4" || *p.Idempotent {
		t.Errorf("properties %+v", p)
	}
}

func TestReadPropertiesLibrdkafkaStyle(t *testing.T) {
	p, err := ReadProperties(writeProps(t, "security.protocol=sasl_plaintext\nsasl.username=bob\nsasl.password=pw\n"))
	if err != nil {
		t.Fatal(err)
	}
	if p.Security.TLS || p.Security.Mechanism != "PLAIN" || p.Security.Username != "bob" || p.Security.Password != "pw" {
		t.Errorf("security %+v: SASL_PLAINTEXT without a mechanism means PLAIN", p.Security)
	}
}

func TestReadPropertiesRejects(t *testing.T) {
	for text, want := range map[string]string{
		"security.protocol=SSL\nssl.truststore.type=JKS\n": "convert the store to PEM",
		"sasl.mechanism=PLAIN\n":                           "security.protocol is PLAINTEXT",
		"ssl.keystore.pasword=x\n":                         `property "ssl.keystore.pasword" is not understood`,
		"linger.ms=soon\n":                                 "linger.ms",
		"security.protocol=TLS\n":                          "one of PLAINTEXT",
		"just words\n":                                     "want key=value",
	} {
		_, err := ReadProperties(writeProps(t, text))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", text, err, want)
		}
	}
}

func TestSecurityOptions(t *testing.T) {
	if _, err := (Security{Mechanism: "GSSAPI", Username: "u"}).Options(); err == nil || !strings.Contains(err.Error(), "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512") {
		t.Errorf("GSSAPI: %v", err)
	}
	if _, err := (Security{Mechanism: "PLAIN"}).Options(); err == nil || !strings.Contains(err.Error(), "username") {
		t.Errorf("no user: %v", err)
	}
	if _, err := (Security{TLS: true, CAFile: writeProps(t, "not a pem")}).Options(); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Errorf("bad CA: %v", err)
	}
}

func TestWorkloadValidateNamesEveryBadFlag(t *testing.T) {
	w := DefaultWorkload()
	w.Topics, w.Rate, w.Payload, w.Acks, w.Compression = 0, -1, "xml", "2", "brotli"
	err := w.Validate()
	for _, flag := range []string{"--topics", "--rate", "--payload", "--acks", "--compression"} {
		if err == nil || !strings.Contains(err.Error(), flag) {
			t.Errorf("error %v does not name %s", err, flag)
		}
	}
	if err := DefaultWorkload().Validate(); err != nil {
		t.Errorf("default workload: %v", err)
	}
}

func TestCountBetween(t *testing.T) {
	s := time.Unix(100, 0)
	iv := 10 * time.Millisecond
	for _, tc := range []struct {
		from, to time.Duration
		want     int64
	}{
		{0, time.Second, 100},
		{5 * time.Millisecond, 25 * time.Millisecond, 2}, // 10 and 20 ms
		{10 * time.Millisecond, 20 * time.Millisecond, 1},
		{-time.Second, 0, 0},
		{time.Second, time.Second, 0},
	} {
		if got := countBetween(s, iv, s.Add(tc.from), s.Add(tc.to)); got != tc.want {
			t.Errorf("[%v, %v): %d, want %d", tc.from, tc.to, got, tc.want)
		}
	}
}
