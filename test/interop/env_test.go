package interop

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/straitgw/strait/internal/kafka/filter"
	"github.com/straitgw/strait/internal/kafka/filters/encryption"
	"github.com/straitgw/strait/internal/kafka/proxy"
	"github.com/straitgw/strait/internal/kms/vault"
	"github.com/straitgw/strait/internal/telemetry"

	"github.com/straitgw/strait/internal/testkit"
)

const (
	numBrokers    = 3
	numPartitions = 6
	// nodePorts is the size of the node port block each gateway gets.
	nodePorts = 10
)

// env is one kfake cluster with a Strait virtual cluster in front of it.
type env struct {
	broker *kfake.Cluster
	vc     *proxy.VirtualCluster
	// addr is the gateway's bootstrap address, always 127.0.0.1:port.
	addr string
	// caFile is the PEM file of the CA that signed the gateway's
	// certificate, when the gateway terminates TLS.
	caFile string
	caPool *x509.CertPool
	// encrypted says the gateway encrypts every topic (withEncryption).
	encrypted bool
	// vaultDir and keys are the vault of an encrypting gateway: the
	// directory its KEKs are kept in and the gateway's own view of it.
	vaultDir string
	keys     *vault.Vault
	// logs holds what the gateway logged.
	logs *testkit.SyncBuffer
}

type envConfig struct {
	tls     bool
	encrypt bool
	// encConfig, when set, changes the encryption filter's config.
	encConfig func(*encryption.Config)
	// filters build more filters for the gateway, after encryption's,
	// given the gateway's logger.
	filters []func(log *slog.Logger) (filter.Filter, error)
}

type envOpt func(*envConfig)

// withTLS makes the gateway terminate TLS with a fresh self-signed
// certificate for 127.0.0.1.
func withTLS() envOpt { return func(c *envConfig) { c.tls = true } }

// withEncryption puts the record-encryption filter in the gateway: every
// topic encrypted, headers too, under one KEK of a fresh vault.
func withEncryption() envOpt { return func(c *envConfig) { c.encrypt = true } }

// withEncryptionConfig is withEncryption with the filter's config changed
// by change (its KEK, say); the vault starts with the KEK interop-kek only.
func withEncryptionConfig(change func(*encryption.Config)) envOpt {
	return func(c *envConfig) { c.encrypt, c.encConfig = true, change }
}

// withFilter adds the filter build makes (given the gateway's logger, so
// what it logs is kept with the gateway's log) to the gateway's chain.
func withFilter(build func(log *slog.Logger) (filter.Filter, error)) envOpt {
	return func(c *envConfig) { c.filters = append(c.filters, build) }
}

// startEnv starts kfake and a gateway in front of it; both stop when the
// test ends. Gateway logs are kept and printed if the test fails, and the
// test fails if the gateway counted a protocol error (something a client
// sent or a broker answered that the gateway could not handle).
func startEnv(t *testing.T, opts ...envOpt) *env {
	t.Helper()
	var cfg envConfig
	for _, o := range opts {
		o(&cfg)
	}
	logs := &testkit.SyncBuffer{}
	t.Cleanup(func() {
		if t.Failed() && logs.Len() > 0 {
			t.Logf("gateway log:\n%s", logs.String())
		}
	})

	b, err := kfake.NewCluster(
		kfake.NumBrokers(numBrokers),
		kfake.AllowAutoTopicCreation(),
		kfake.DefaultNumPartitions(numPartitions),
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	advertiseProduceV0(t, b)

	e := &env{broker: b, logs: logs}
	var serverTLS *tls.Config
	if cfg.tls {
		ca := testkit.NewCA(t)
		serverTLS = ca.ServerTLS(t)
		certPEM := ca.PEM
		e.caFile = filepath.Join(t.TempDir(), "ca.pem")
		if err := os.WriteFile(e.caFile, certPEM, 0o600); err != nil {
			t.Fatal(err)
		}
		e.caPool = x509.NewCertPool()
		e.caPool.AppendCertsFromPEM(certPEM)
	}

	var filters []filter.Filter
	if cfg.encrypt {
		dir := filepath.Join(t.TempDir(), "vault")
		if _, err := vault.CreateKey(dir, "interop-kek"); err != nil {
			t.Fatal(err)
		}
		v, err := vault.Open(dir, vault.Options{})
		if err != nil {
			t.Fatal(err)
		}
		ecfg := encryption.Config{Topics: []string{"*"}, KEK: "interop-kek", EncryptHeaders: true}
		if cfg.encConfig != nil {
			cfg.encConfig(&ecfg)
		}
		f, err := encryption.New(ecfg, v)
		if err != nil {
			t.Fatal(err)
		}
		filters = append(filters, f)
		e.encrypted = true
		e.vaultDir, e.keys = dir, v
	}

	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	for _, build := range cfg.filters {
		f, err := build(log)
		if err != nil {
			t.Fatal(err)
		}
		filters = append(filters, f)
	}

	reg := prometheus.NewRegistry()
	metrics := telemetry.NewKafkaMetrics(reg)
	base := testkit.PortBlock(t, nodePorts+1)
	vc, err := proxy.New(proxy.Options{
		Name:          "interop",
		Listen:        fmt.Sprintf("127.0.0.1:%d", base),
		NodePortStart: base + 1,
		NodePortEnd:   base + nodePorts,
		TLS:           serverTLS,
		Target:        proxy.Target{Bootstrap: b.ListenAddrs()},
		Log:           log,
		Metrics:       metrics,
		Filters:       filters,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := vc.Start(); err != nil {
		t.Fatal(err)
	}
	e.vc = vc
	e.addr = vc.Addr().String()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := vc.Shutdown(ctx); err != nil {
			t.Logf("gateway shutdown: %v", err)
		}
		checkGatewayErrors(t, reg)
		checkHandshakeLog(t, logs.String())
	})
	waitNodeListeners(t, base, e.caPool)
	return e
}

// waitNodeListeners waits until the node listeners of the gateway whose
// bootstrap port is base accept connections (TLS ones if pool is set). A
// gateway opens them in the background: no client may be told about a
// port that is not open yet.
func waitNodeListeners(t *testing.T, base int, pool *x509.CertPool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for n := range numBrokers {
		addr := testkit.Addr(base + 1 + n)
		for {
			err := probe(addr, pool)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("gateway node listener %s never opened: %v", addr, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// advertiseProduceV0 makes kfake list Produce from version 0 in its
// ApiVersions answers, as Apache Kafka 4.x does although it serves only
// v3 and up (KAFKA-18659): librdkafka before 2.10 checks for Produce v0..v2
// before it compresses with gzip, snappy or lz4, and otherwise sends those
// batches uncompressed without telling anyone. kfake lists Produce from v3.
// Real clients negotiate the highest common version, so none sends v0-v2.
func advertiseProduceV0(t *testing.T, b *kfake.Cluster) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrApiVersionsRequest()
	req.ClientSoftwareName = "strait-interop"
	req.ClientSoftwareVersion = "1"
	tmpl, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("kfake ApiVersions: %v", err)
	}
	if err := kerr.ErrorForCode(tmpl.ErrorCode); err != nil {
		t.Fatalf("kfake ApiVersions: %v", err)
	}
	for i := range tmpl.ApiKeys {
		if tmpl.ApiKeys[i].ApiKey == int16(kmsg.Produce) {
			tmpl.ApiKeys[i].MinVersion = 0
		}
	}
	b.ControlKey(int16(kmsg.ApiVersions), func(r kmsg.Request) (kmsg.Response, error, bool) {
		b.KeepControl()
		req := r.(*kmsg.ApiVersionsRequest)
		if req.Version > 4 { // v5 checks cluster and node ids: kfake's job
			return nil, nil, false
		}
		resp := *tmpl
		resp.Version = req.Version
		resp.ApiKeys = slices.Clone(tmpl.ApiKeys)
		return &resp, nil, true
	})
}

// probe connects to addr, completing a TLS handshake if pool is set (a bare
// TCP connect would count as a failed handshake at a TLS gateway).
func probe(addr string, pool *x509.CertPool) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	if pool == nil {
		return nil
	}
	tc := tls.Client(c, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
	tc.SetDeadline(time.Now().Add(5 * time.Second))
	return tc.Handshake()
}

// protocolErrorKinds are gateway error kinds that point at the gateway (or
// a client or broker breaking the protocol), never at a client merely
// hanging up. kfake stays up for the whole test, so a broker connection
// closing under the gateway is one too.
var protocolErrorKinds = map[string]bool{
	"upstream_closed":   true,
	"upstream_connect":  true,
	"frame_too_large":   true,
	"malformed_frame":   true,
	"unsupported_api":   true,
	"upstream_protocol": true,
	"upstream_timeout":  true,
	"filter":            true,
	// tls_handshake is judged from the log instead: a client that gives up
	// on a connection it has just opened (librdkafka closing down, say)
	// counts too, and that is no fault.
}

// checkHandshakeLog fails the test for every failed TLS handshake the
// gateway logged other than a client hanging up mid-handshake.
func checkHandshakeLog(t *testing.T, log string) {
	t.Helper()
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, "TLS handshake with client failed") {
			continue
		}
		if strings.HasSuffix(line, " err=EOF") || strings.Contains(line, "connection reset by peer") {
			t.Logf("a client hung up during the TLS handshake: %s", line)
			continue
		}
		t.Errorf("TLS handshake failed: %s", line)
	}
}

func checkGatewayErrors(t *testing.T, reg *prometheus.Registry) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Errorf("gathering gateway metrics: %v", err)
		return
	}
	for _, mf := range mfs {
		if mf.GetName() != "strait_kafka_errors_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			kind := ""
			for _, l := range m.GetLabel() {
				if l.GetName() == "kind" {
					kind = l.GetValue()
				}
			}
			n := m.GetCounter().GetValue()
			switch {
			case n == 0:
			case protocolErrorKinds[kind]:
				t.Errorf("gateway counted %v %s error(s); see the gateway log", n, kind)
			default:
				t.Logf("gateway counted %v %s error(s) (clients hanging up)", n, kind)
			}
		}
	}
}

// topicName returns a topic name unique to this test run.
func topicName(t *testing.T, suffix string) string {
	name := strings.NewReplacer("/", "-", " ", "-", "_", "-").Replace(t.Name())
	return strings.ToLower(fmt.Sprintf("%s-%s-%d", name, suffix, time.Now().UnixNano()%1e9))
}
