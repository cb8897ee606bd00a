package cli

import (
	"cmp"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/straitgw/strait/bench/schemas"
	"github.com/straitgw/strait/internal/auth/credstore"
	"github.com/straitgw/strait/internal/bench/kafkaload"
	"github.com/straitgw/strait/internal/bench/report"
	"github.com/straitgw/strait/internal/bench/result"
	"github.com/straitgw/strait/internal/kms/vault"
)

// passthroughLayer is the gateway config of the "passthrough" setup. Layer
// configs given with --layer use the same environment variables, which
// `strait bench layers` sets for each gateway it starts (docs/bench.md).
const passthroughLayer = `# The proxy hop alone: no filters.
admin: {listen: "${env:STRAIT_BENCH_ADMIN}"}
log: {level: warn}
clusters:
  bench:
    bootstrap_servers: ["${env:STRAIT_BENCH_BROKER}"]
%s
virtual_clusters:
  - name: bench
    cluster: bench
    listen: "${env:STRAIT_BENCH_LISTEN}"
%s`

const (
	brokerTLSBlock  = "    tls: {enabled: true, ca_file: \"${env:STRAIT_BENCH_CA}\"}"
	gatewayTLSBlock = "    tls: {cert_file: \"${env:STRAIT_BENCH_TLS_CERT}\", key_file: \"${env:STRAIT_BENCH_TLS_KEY}\"}"
)

func runBenchLayers(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bench layers", stdout, stderr)
	workload := workloadFlags(fs)
	var layers multiFlag
	fs.Var(&layers, "layer", "a further setup NAME=CONFIG.yaml[,payload=KIND][,schema-id=N], measured after passthrough in the order given; the options change the workload for that setup, and CONFIG.yaml may be direct or passthrough, the built-in setups (repeatable)")
	security := fs.String("security", "plaintext", "plaintext, ssl, sasl_plaintext or sasl_ssl: how clients, gateway and broker connect")
	brokerPort := fs.Int("broker-port", 29092, "port of the development broker started for the run")
	gatewayPort := fs.Int("gateway-port", 29192, "bootstrap port of each gateway (node ports follow it)")
	strait := fs.String("strait", "", "strait binary to run the broker and gateways with (default: this one)")
	outDir := fs.String("out-dir", "", "write one result JSON per setup here (for strait bench compare)")
	jsonPath := fs.String("json", "", "write every setup's result, as a JSON array, to this file")
	htmlPath := fs.String("report", "", "write a self-contained HTML report of the setups' latency curves")
	quiet := fs.Bool("quiet", false, "no live progress line")
	perAPI := perAPIFlag(fs, "each gateway setup")
	rounds := fs.Int("rounds", 1, "measure every setup this many times, interleaved (direct, passthrough, ..., direct, ...); the table shows each setup's median round by publish p99")
	// A layer table must finish in minutes here: short phases by default.
	setDefaults(fs, map[string]string{"warmup": "5s", "duration": "20s", "window": "2s", "rate": "5000", "bootstrap": "(set by the run)"})
	if err := parse(fs, args); err != nil {
		return err
	}
	w, err := workload()
	if err != nil {
		return err
	}
	setups, err := layerSetups(layers, w)
	if err != nil {
		return err
	}
	if *perAPI && w.ConsumerGroups == 0 {
		return errors.New("--per-api splits the gateway's CPU between Produce and Fetch: it needs --consumer-groups of 1 or more")
	}
	if *rounds < 1 || *rounds > 20 {
		return fmt.Errorf("--rounds %d: use 1 to 20", *rounds)
	}
	tlsOn := *security == "ssl" || *security == "sasl_ssl"
	saslOn := strings.HasPrefix(*security, "sasl_")
	if !tlsOn && !saslOn && *security != "plaintext" {
		return fmt.Errorf("--security %q: use plaintext, ssl, sasl_plaintext or sasl_ssl", *security)
	}
	exe := *strait
	if exe == "" {
		if exe, err = os.Executable(); err != nil {
			return err
		}
	}
	dir, err := os.MkdirTemp("", "strait-layers-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	// A vault with one KEK, bench-kek, for layers that encrypt.
	vaultDir := filepath.Join(dir, "vault")
	if _, err := vault.CreateKey(vaultDir, "bench-kek"); err != nil {
		return fmt.Errorf("benchmark vault: %w", err)
	}
	// The reference record's schemas, for layers that validate records
	// (bench/layers/validation-*.yaml read them from STRAIT_BENCH_SCHEMAS).
	schemaDir := filepath.Join(dir, "schemas")
	if err := writeBenchSchemas(schemaDir); err != nil {
		return fmt.Errorf("benchmark schemas: %w", err)
	}
	broker := fmt.Sprintf("127.0.0.1:%d", *brokerPort)
	adminAddr := fmt.Sprintf("127.0.0.1:%d", *gatewayPort-1)
	env := append(os.Environ(), "STRAIT_BENCH_BROKER="+broker, "STRAIT_BENCH_SCHEMAS="+schemaDir,
		fmt.Sprintf("STRAIT_BENCH_LISTEN=127.0.0.1:%d", *gatewayPort),
		"STRAIT_BENCH_ADMIN="+adminAddr, "STRAIT_BENCH_VAULT="+vaultDir)
	brokerArgs := []string{"broker", "--brokers", "1", "--listen", broker,
		"--partitions", strconv.Itoa(w.Partitions), "--retention-bytes", strconv.Itoa(256 << 20)}
	if tlsOn {
		cert, key, err := writeSelfSigned(dir)
		if err != nil {
			return err
		}
		env = append(env, "STRAIT_BENCH_CA="+cert, "STRAIT_BENCH_TLS_CERT="+cert, "STRAIT_BENCH_TLS_KEY="+key)
		brokerArgs = append(brokerArgs, "--tls-cert", cert, "--tls-key", key)
		w.Security.TLS, w.Security.CAFile = true, cert
	}
	if saslOn {
		if w.Security.Mechanism == "" {
			w.Security.Mechanism = "SCRAM-SHA-512"
		}
		if w.Security.Username == "" {
			w.Security.Username, w.Security.Password = "bench", "bench-secret"
		}
		brokerArgs = append(brokerArgs, "--user", w.Security.Username+":"+w.Security.Password)
		// For layers that terminate SASL (bench/layers/sasl-*.yaml): the
		// same user in a credential store the gateway checks clients
		// against, and its password, with which the gateway logs in to
		// the broker as itself.
		users := filepath.Join(dir, "users.store")
		if _, err := credstore.AddUser(users, w.Security.Username, w.Security.Password, credstore.DefaultIterations); err != nil {
			return fmt.Errorf("benchmark credential store: %w", err)
		}
		env = append(env, "STRAIT_BENCH_USERS="+users, "STRAIT_BENCH_USER="+w.Security.Username, "STRAIT_BENCH_PASSWORD="+w.Security.Password)
	}
	bp, err := startChild(ctx, exe, brokerArgs, env, stderr)
	if err != nil {
		return fmt.Errorf("starting the broker: %w", err)
	}
	defer stopChild(bp)
	if err := waitListening(ctx, broker, 20*time.Second); err != nil {
		return fmt.Errorf("the broker: %w", err)
	}

	// Rounds interleave the setups, so that a noisy neighbour spreads over
	// all of them instead of biasing whichever ran at the time.
	byRound := make([][]*result.Kafka, len(setups))
	for round := 1; round <= *rounds; round++ {
		for si, s := range setups {
			sw := s.workloadOf(w)
			pids := []int{bp.Process.Pid}
			var gw *exec.Cmd
			if s.direct {
				sw.Bootstrap = []string{broker}
			} else {
				cfg := s.config
				if cfg == "" {
					b, g := "", ""
					if tlsOn {
						b, g = brokerTLSBlock, gatewayTLSBlock
					}
					cfg = fmt.Sprintf(passthroughLayer, b, g)
				}
				path := filepath.Join(dir, s.name+".yaml")
				if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
					return err
				}
				if gw, err = startChild(ctx, exe, []string{"run", "-c", path}, env, stderr); err != nil {
					return fmt.Errorf("setup %s: starting the gateway: %w", s.name, err)
				}
				addr := fmt.Sprintf("127.0.0.1:%d", *gatewayPort)
				if err := waitListening(ctx, addr, 20*time.Second); err != nil {
					stopChild(gw)
					return fmt.Errorf("setup %s: the gateway (config %s): %w", s.name, path, err)
				}
				sw.Bootstrap = []string{addr}
				pids = append(pids, gw.Process.Pid)
			}
			opt := runOptions(s.name, pids, *quiet, stderr, args)
			if gw != nil {
				opt.GatewayMetrics = gatewayMetricsURL(ctx, adminAddr, s.name, stderr)
			}
			var produceOnly *result.Kafka
			if *perAPI && gw != nil {
				fmt.Fprintf(stderr, "== %s, produce only (for --per-api)%s\n", s.name, roundSuffix(round, *rounds))
				po, poOpt := sw, opt
				po.ConsumerGroups = 0
				poOpt.Label += " produce-only"
				if produceOnly, err = kafkaload.Run(ctx, po, poOpt); err != nil {
					stopChild(gw)
					return fmt.Errorf("setup %s, produce only: %w", s.name, err)
				}
				nameProcesses(produceOnly, true)
			}
			fmt.Fprintf(stderr, "== %s (payload %s)%s\n", s.name, s.payloadLabel(), roundSuffix(round, *rounds))
			res, err := kafkaload.Run(ctx, sw, opt)
			if gw != nil {
				stopChild(gw)
			}
			if err != nil {
				return fmt.Errorf("setup %s: %w", s.name, err)
			}
			nameProcesses(res, gw != nil)
			if produceOnly != nil {
				result.SplitByAPI(res, produceOnly)
			}
			byRound[si] = append(byRound[si], res)
			if *outDir != "" {
				if err := os.MkdirAll(*outDir, 0o755); err != nil {
					return err
				}
				name := s.name + strings.ReplaceAll(roundSuffix(round, *rounds), " ", "-")
				if err := result.Write(filepath.Join(*outDir, name+".json"), res); err != nil {
					return err
				}
			}
			// Let the gateway's ports close before the next one binds them.
			time.Sleep(200 * time.Millisecond)
		}
	}
	runs := make([]*result.Kafka, len(setups))
	for i := range setups {
		runs[i] = medianRound(byRound[i])
	}
	if *rounds > 1 {
		fmt.Fprintf(stdout, "Each setup's median of %d interleaved rounds, by publish p99.\n\n", *rounds)
	}
	if err := report.LayerTable(stdout, layerTable(setups, runs)); err != nil {
		return err
	}
	return writeOutputs(*jsonPath, *htmlPath, "strait bench layers", runs, runs, nil)
}

// layerSetup is one setup of a layer table: direct, or a gateway started
// with config (none: the passthrough), measured with the run's workload
// sending payload (with schemaID, if not 0).
type layerSetup struct {
	name     string
	direct   bool
	config   string
	payload  string
	schemaID int
	// over is the index of the setup this one's share is measured over.
	over int
}

// workloadOf is the run's workload w as the setup sends it.
func (s layerSetup) workloadOf(w kafkaload.Workload) kafkaload.Workload {
	w.Payload, w.SchemaID = s.payload, s.schemaID
	return w
}

// layerSetups are the setups of a run of workload w: direct, passthrough,
// then one per --layer, each with the setup its share is measured over.
func layerSetups(layers []string, w kafkaload.Workload) ([]layerSetup, error) {
	setups := []layerSetup{
		{name: "direct", direct: true, payload: w.Payload, schemaID: w.SchemaID},
		{name: "passthrough", payload: w.Payload, schemaID: w.SchemaID},
	}
	for _, arg := range layers {
		s, err := parseLayer(arg, w)
		if err != nil {
			return nil, err
		}
		if slices.ContainsFunc(setups, func(o layerSetup) bool { return o.name == s.name }) {
			return nil, fmt.Errorf("--layer %s: there is already a setup of that name (each names its result files)", s.name)
		}
		setups = append(setups, s)
	}
	for i := range setups {
		setups[i].over = baselineOf(setups, i)
	}
	return setups, nil
}

// layerUsage is the syntax of a --layer.
const layerUsage = "NAME=CONFIG.yaml[,payload=KIND][,schema-id=N]"

// parseLayer reads a --layer: NAME=CONFIG.yaml, where CONFIG.yaml may be
// the word direct or passthrough for another run of a built-in setup, then
// options that change the workload w for this setup alone: payload=KIND
// and schema-id=N (0: no wire-format prefix).
func parseLayer(arg string, w kafkaload.Workload) (layerSetup, error) {
	name, rest, _ := strings.Cut(arg, "=")
	fields := strings.Split(rest, ",")
	path := fields[0]
	if name == "" || path == "" {
		return layerSetup{}, fmt.Errorf("--layer %q: want %s", arg, layerUsage)
	}
	if strings.ContainsAny(name, `/\`) || name == "." || name == ".." {
		return layerSetup{}, fmt.Errorf("--layer %q: the name is not a file name (it names the setup's result files)", arg)
	}
	s := layerSetup{name: name, payload: w.Payload, schemaID: w.SchemaID}
	given := map[string]bool{}
	for _, opt := range fields[1:] {
		key, value, _ := strings.Cut(opt, "=")
		if given[key] {
			return layerSetup{}, fmt.Errorf("--layer %s: %s is given twice", name, key)
		}
		given[key] = true
		switch key {
		case "payload":
			s.payload = value
		case "schema-id":
			n, err := strconv.Atoi(value)
			if err != nil || n < 0 {
				return layerSetup{}, fmt.Errorf("--layer %s: schema-id=%q is not a schema id (a whole number; 0 for none)", name, value)
			}
			s.schemaID = n
		default:
			return layerSetup{}, fmt.Errorf("--layer %s: unknown option %q (want %s)", name, key, layerUsage)
		}
	}
	// The run's workload is valid: whatever is wrong now is the setup's
	// payload or schema id, or how they go with the run's.
	if err := s.workloadOf(w).Validate(); err != nil {
		return layerSetup{}, fmt.Errorf("--layer %s (payload %s, schema id %d): %w", name, s.payload, s.schemaID, err)
	}
	switch path {
	case "direct":
		s.direct = true
	case "passthrough":
	default:
		b, err := os.ReadFile(path)
		if err != nil {
			return layerSetup{}, fmt.Errorf("--layer %s: %w", name, err)
		}
		s.config = string(b)
	}
	return s, nil
}

// baselineOf is the index of the setup that setups[i]'s share is measured
// over: the nearest earlier one that sent the same payload (for a direct
// setup, the nearest such direct one), so that the share is what the layer
// costs and not what another payload does; failing that, the same system
// with the run's own payload: the first direct setup for a direct one,
// passthrough for a gateway. The first setup has none (-1).
func baselineOf(setups []layerSetup, i int) int {
	if i == 0 {
		return -1
	}
	cur := setups[i]
	for j := i - 1; j >= 0; j-- {
		o := setups[j]
		if o.payload == cur.payload && o.schemaID == cur.schemaID && (o.direct || !cur.direct) {
			return j
		}
	}
	if cur.direct {
		return 0
	}
	return 1
}

// payloadLabel names the payload the setup sends, in tables.
func (s layerSetup) payloadLabel() string {
	if s.schemaID == 0 {
		return s.payload
	}
	return fmt.Sprintf("%s, schema id %d", s.payload, s.schemaID)
}

// layerTable is the report's view of the setups and their runs.
func layerTable(setups []layerSetup, runs []*result.Kafka) []report.Layer {
	out := make([]report.Layer, len(setups))
	for i, s := range setups {
		out[i] = report.Layer{Run: report.KafkaRun(runs[i]), Payload: s.payloadLabel(), Over: s.over}
	}
	return out
}

// roundSuffix names a round in progress lines and file names, when there
// is more than one.
func roundSuffix(round, rounds int) string {
	if rounds == 1 {
		return ""
	}
	return fmt.Sprintf(" round %d", round)
}

// medianRound returns the round whose publish p99 is the median (the
// lower middle for an even count), preferring valid rounds.
func medianRound(rs []*result.Kafka) *result.Kafka {
	pool := make([]*result.Kafka, 0, len(rs))
	for _, r := range rs {
		if r.Valid {
			pool = append(pool, r)
		}
	}
	if len(pool) == 0 {
		pool = append(pool, rs...)
	}
	slices.SortStableFunc(pool, func(a, b *result.Kafka) int { return cmp.Compare(a.PublishLatency.P99, b.PublishLatency.P99) })
	return pool[(len(pool)-1)/2]
}

// gatewayMetricsURL is the metrics page of a setup's gateway, whose
// admin listener the built-in setups and bench/layers configs put at
// STRAIT_BENCH_ADMIN; "" (and a note) when a layer's config puts it
// elsewhere, so that its run counts requests by its clients instead.
func gatewayMetricsURL(ctx context.Context, adminAddr, setup string, stderr io.Writer) string {
	if err := waitListening(ctx, adminAddr, 5*time.Second); err != nil {
		fmt.Fprintf(stderr, "setup %s: no admin listener at %s (STRAIT_BENCH_ADMIN), so requests are counted by the clients\n", setup, adminAddr)
		return ""
	}
	return "http://" + adminAddr + "/metrics"
}

// nameProcesses labels the watched processes of a layer run.
func nameProcesses(res *result.Kafka, gateway bool) {
	for i := range res.Processes {
		switch {
		case i == 0:
			res.Processes[i].Name = "broker"
		case gateway:
			res.Processes[i].Name = "gateway"
		}
	}
}

func startChild(ctx context.Context, exe string, args, env []string, stderr io.Writer) (*exec.Cmd, error) {
	cmd := exec.Command(exe, args...)
	cmd.Env = env
	cmd.Stdout = io.Discard
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return cmd, nil
}

// stopChild asks a child to stop (SIGTERM), and kills it if it has not
// within 10 s.
func stopChild(cmd *exec.Cmd) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

func waitListening(ctx context.Context, addr string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nothing listens on %s after %s: %w", addr, limit, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// writeSelfSigned writes a throwaway self-signed certificate for 127.0.0.1
// (it is its own CA) and its key, for TLS layer runs.
func writeSelfSigned(dir string) (certPath, keyPath string, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "strait bench"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(7 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return "", "", err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", "", err
	}
	certPath, keyPath = filepath.Join(dir, "bench.pem"), filepath.Join(dir, "bench-key.pem")
	err = errors.Join(
		os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600),
		os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600))
	return certPath, keyPath, err
}

// writeBenchSchemas writes the reference record's schemas (bench/schemas)
// into dir as record.avsc, record.proto and record.schema.json.
func writeBenchSchemas(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, text := range map[string]string{"record.avsc": schemas.Avro, "record.proto": schemas.Proto, "record.schema.json": schemas.JSONSchema} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			return err
		}
	}
	return nil
}
