package kafkaload

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// Security is how the generator's clients connect: TLS and SASL.
type Security struct {
	TLS bool `json:"tls"`
	// CAFile is a PEM bundle to trust (system roots when empty).
	CAFile string `json:"ca_file,omitempty"`
	// CertFile and KeyFile are a client certificate for mutual TLS (PEM).
	CertFile string `json:"cert_file,omitempty"`
	KeyFile  string `json:"key_file,omitempty"`
	// ServerName overrides the name checked in the server certificate.
	ServerName string `json:"server_name,omitempty"`
	// SkipHostnameCheck verifies the chain but not the host name, like
	// ssl.endpoint.identification.algorithm left empty.
	SkipHostnameCheck bool `json:"skip_hostname_check,omitempty"`
	// Insecure skips certificate verification altogether.
	Insecure bool `json:"insecure,omitempty"`

	// Mechanism is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512; empty means no
	// SASL.
	Mechanism string `json:"sasl_mechanism,omitempty"`
	Username  string `json:"sasl_username,omitempty"`
	// Password is never written to results.
	Password string `json:"-"`
}

// Mechanisms lists the SASL mechanisms the generator speaks.
var Mechanisms = []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}

// Options returns the franz-go options for s.
func (s Security) Options() ([]kgo.Opt, error) {
	var opts []kgo.Opt
	if s.TLS {
		cfg, err := s.tlsConfig()
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(cfg))
	}
	switch strings.ToUpper(s.Mechanism) {
	case "":
	case "PLAIN":
		opts = append(opts, kgo.SASL(plain.Auth{User: s.Username, Pass: s.Password}.AsMechanism()))
	case "SCRAM-SHA-256":
		opts = append(opts, kgo.SASL(scram.Auth{User: s.Username, Pass: s.Password}.AsSha256Mechanism()))
	case "SCRAM-SHA-512":
		opts = append(opts, kgo.SASL(scram.Auth{User: s.Username, Pass: s.Password}.AsSha512Mechanism()))
	default:
		return nil, fmt.Errorf("SASL mechanism %q is not supported; use one of %s", s.Mechanism, strings.Join(Mechanisms, ", "))
	}
	if s.Mechanism != "" && s.Username == "" {
		return nil, fmt.Errorf("SASL mechanism %s needs a username (--sasl-user or sasl.username)", s.Mechanism)
	}
	return opts, nil
}

func (s Security) tlsConfig() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: s.ServerName, InsecureSkipVerify: s.Insecure}
	if s.CAFile != "" {
		pem, err := os.ReadFile(s.CAFile)
		if err != nil {
			return nil, fmt.Errorf("CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CA file %s holds no PEM certificate", s.CAFile)
		}
		cfg.RootCAs = pool
	}
	if (s.CertFile == "") != (s.KeyFile == "") {
		return nil, errors.New("a client certificate needs both its certificate and its key file")
	}
	if s.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(s.CertFile, s.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	if s.SkipHostnameCheck && !s.Insecure {
		// Verify the chain ourselves, without the host name.
		roots := cfg.RootCAs
		cfg.InsecureSkipVerify = true
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("the server sent no certificate")
			}
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter})
			return err
		}
	}
	return cfg, nil
}

// Properties are settings read from a Kafka-style client properties file.
// Only keys the generator understands are accepted; others are reported so
// that a typo does not silently change a run.
type Properties struct {
	Bootstrap []string
	Security  Security
	// Producer settings; nil/empty when the file does not set them.
	Acks        string
	Linger      *time.Duration
	BatchBytes  int
	Compression string
	Idempotent  *bool
}

var jaasField = regexp.MustCompile(`(username|password)\s*=\s*"([^"]*)"`)

// ReadProperties parses a Kafka-style properties file: security.protocol,
// sasl.mechanism, sasl.jaas.config (or librdkafka's sasl.username and
// sasl.password), ssl.* locations of PEM files, bootstrap.servers and the
// producer settings acks, linger.ms, batch.size, compression.type and
// enable.idempotence.
func ReadProperties(path string) (*Properties, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	p := &Properties{}
	protocol := "PLAINTEXT"
	trustType := ""
	sc := bufio.NewScanner(f)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || text[0] == '#' || text[0] == '!' {
			continue
		}
		k, v, ok := strings.Cut(text, "=")
		if !ok {
			k, v, ok = strings.Cut(text, ":")
		}
		if !ok {
			return nil, fmt.Errorf("%s:%d: want key=value, got %q", path, line, text)
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		bad := func(want string) error { return fmt.Errorf("%s:%d: %s: %q is not %s", path, line, k, v, want) }
		switch k {
		case "bootstrap.servers":
			p.Bootstrap = splitList(v)
		case "security.protocol":
			protocol = strings.ToUpper(v)
			switch protocol {
			case "PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL":
			default:
				return nil, bad("one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL")
			}
		case "sasl.mechanism", "sasl.mechanisms":
			p.Security.Mechanism = strings.ToUpper(v)
		case "sasl.jaas.config":
			for _, m := range jaasField.FindAllStringSubmatch(v, -1) {
				if m[1] == "username" {
					p.Security.Username = m[2]
				} else {
					p.Security.Password = m[2]
				}
			}
		case "sasl.username":
			p.Security.Username = v
		case "sasl.password":
			p.Security.Password = v
		case "ssl.truststore.type":
			trustType = strings.ToUpper(v)
		case "ssl.truststore.location", "ssl.ca.location":
			p.Security.CAFile = v
		case "ssl.keystore.location", "ssl.certificate.location":
			p.Security.CertFile = v
		case "ssl.key.location":
			p.Security.KeyFile = v
		case "ssl.endpoint.identification.algorithm":
			p.Security.SkipHostnameCheck = v == ""
		case "acks":
			p.Acks = v
		case "linger.ms":
			ms, err := strconv.ParseFloat(v, 64)
			if err != nil || ms < 0 {
				return nil, bad("a number of milliseconds")
			}
			d := time.Duration(ms * float64(time.Millisecond))
			p.Linger = &d
		case "batch.size":
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return nil, bad("a positive number of bytes")
			}
			p.BatchBytes = n
		case "compression.type":
			p.Compression = v
		case "enable.idempotence":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return nil, bad("true or false")
			}
			p.Idempotent = &b
		default:
			return nil, fmt.Errorf("%s:%d: property %q is not understood by the benchmark (it reads bootstrap.servers, security.protocol, sasl.*, ssl.* PEM locations, acks, linger.ms, batch.size, compression.type, enable.idempotence)", path, line, k)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if trustType != "" && trustType != "PEM" {
		return nil, fmt.Errorf("%s: ssl.truststore.type %s is not supported: convert the store to PEM and set ssl.truststore.type=PEM", path, trustType)
	}
	p.Security.TLS = protocol == "SSL" || protocol == "SASL_SSL"
	sasl := protocol == "SASL_PLAINTEXT" || protocol == "SASL_SSL"
	switch {
	case sasl && p.Security.Mechanism == "":
		p.Security.Mechanism = "PLAIN" // Kafka's default sasl.mechanism
	case !sasl && p.Security.Mechanism != "":
		return nil, fmt.Errorf("%s: sasl.mechanism is set but security.protocol is %s; use SASL_PLAINTEXT or SASL_SSL", path, protocol)
	}
	return p, nil
}

func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}
