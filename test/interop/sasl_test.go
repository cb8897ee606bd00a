package interop

// Clients authenticating to the gateway with SASL. The gateway terminates
// PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER itself (users in a
// credential store, tokens checked against a JWKS file) and logs in to a
// broker that demands SCRAM-SHA-512 as a user of its own. Every client
// authenticates, produces and consumes; a filter in the chain records the
// principal of each Produce; and each client is refused a wrong password,
// a mechanism the listener does not offer and an expired token, with what
// it tells the application checked (docs/security.md#what-clients-report).

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	kafkasasl "github.com/twmb/franz-go/pkg/sasl"
	franzoauth "github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	xdgscram "github.com/xdg-go/scram"

	"github.com/straitgw/strait/internal/auth/credstore"
	"github.com/straitgw/strait/internal/auth/oauth"
	"github.com/straitgw/strait/internal/auth/sasl"
	"github.com/straitgw/strait/internal/kafka/filter"
	"github.com/straitgw/strait/internal/kafka/proxy"
	"github.com/straitgw/strait/internal/kafka/wire"
	"github.com/straitgw/strait/internal/telemetry"
	"github.com/straitgw/strait/internal/testkit"
)

const (
	// gatewayUser is the gateway's own SCRAM-SHA-512 user at the broker.
	gatewayUser = "strait-gateway"
	gatewayPass = "gateway-secret-9d2b"
	// wrongPassword is what clients are refused with.
	wrongPassword = "not-the-password-3a7f"

	tokenIssuerURL = "https://issuer.interop.invalid"
	tokenAudience  = "strait-interop"
	tokenKeyID     = "interop-rsa-1"

	mechPlain       = "PLAIN"
	mechSCRAM256    = "SCRAM-SHA-256"
	mechSCRAM512    = "SCRAM-SHA-512"
	mechOAuthBearer = "OAUTHBEARER"

	// saslRecords is how many records each SASL round trip sends, over
	// saslPartitions partitions (so connections to several brokers
	// authenticate).
	saslRecords    = 12
	saslPartitions = 3
	// saslClientTimeout bounds each client's round trip or refusal.
	saslClientTimeout = 40 * time.Second
)

// userFor and passFor are a client's user in the credential store: one
// user per client, so that a principal seen on another client's
// connection would show.
func userFor(client string) string { return client }
func passFor(client string) string { return client + "-pass-5e1c" }

// subjectFor is the sub of the tokens a client is given.
func subjectFor(client string) string { return "svc-" + client }

// saslUsers are the users of the credential store.
var saslUsers = []string{"franz-go", "sarama", "sarama-v0", "kcat", "kafka-python", "confluent-kafka-python", "kafkajs"}

// saslEnv is a broker that demands SCRAM-SHA-512 of the gateway, and a
// gateway in front of it that terminates client SASL.
type saslEnv struct {
	env
	issuer *tokenIssuer
	seen   *producePrincipals
	// scramOnlyAddr is a second gateway in front of the same broker that
	// offers SCRAM-SHA-512 only, with the nonce checked strictly (as
	// Kafka 4 does: scram_nonce: strict).
	scramOnlyAddr string
	// admin reaches the broker directly, as the gateway's user.
	admin *kgo.Client
}

// startSASLEnv starts kfake with SASL, a gateway offering PLAIN,
// SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER (users of saslUsers in a
// credential store made with credstore.AddUser; tokens of e.issuer), and a
// second gateway offering SCRAM-SHA-512 only. Everything stops when the
// test ends; the test fails if a gateway counted a protocol error.
func startSASLEnv(t *testing.T) *saslEnv {
	t.Helper()
	logs := &testkit.SyncBuffer{}
	t.Cleanup(func() {
		if t.Failed() && logs.Len() > 0 {
			t.Logf("gateway log:\n%s", logs.String())
		}
	})
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	dir := t.TempDir()

	b, err := kfake.NewCluster(
		kfake.NumBrokers(numBrokers),
		kfake.EnableSASL(),
		kfake.Superuser(mechSCRAM512, gatewayUser, gatewayPass),
		kfake.DefaultNumPartitions(saslPartitions),
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	advertiseSASLHandshakeV0(t, b)
	admin, err := kgo.NewClient(kgo.SeedBrokers(b.ListenAddrs()...), kgo.SASL(gatewayMechanism()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(admin.Close)

	store := filepath.Join(dir, "users.json")
	for _, client := range saslUsers {
		if _, err := credstore.AddUser(store, userFor(client), passFor(client), credstore.MinIterations); err != nil {
			t.Fatal(err)
		}
	}
	creds, err := credstore.Open(store, credstore.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	issuer := newTokenIssuer(t, dir)
	validator, err := oauth.New(oauth.Config{
		JWKSFile: issuer.jwksFile,
		Issuer:   tokenIssuerURL,
		Audience: []string{tokenAudience},
	}, oauth.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	scram512 := sasl.NewSCRAMSHA512(creds)
	all := []sasl.Mechanism{sasl.NewPlain(creds), sasl.NewSCRAMSHA256(creds), scram512, sasl.NewOAuthBearer(validator, sasl.OAuthBearerOptions{})}

	e := &saslEnv{env: env{broker: b, logs: logs}, issuer: issuer, seen: &producePrincipals{}, admin: admin}
	reg := prometheus.NewRegistry()
	metrics := telemetry.NewKafkaMetrics(reg)
	e.addr = startSASLGateway(t, "interop-sasl", b, all, log, metrics, e.seen)
	strict512 := sasl.NewSCRAMSHA512(creds)
	strict512.StrictNonce = true
	e.scramOnlyAddr = startSASLGateway(t, "interop-scram-only", b, []sasl.Mechanism{strict512}, log, metrics)
	t.Cleanup(func() { // after the gateways' shutdowns
		checkGatewayErrors(t, reg)
		checkNoSecrets(t, logs.String())
	})
	return e
}

// checkNoSecrets fails the test if the gateway logged a password or a
// bearer token (every JWT starts with the base64 of `{"`).
func checkNoSecrets(t *testing.T, log string) {
	t.Helper()
	for _, client := range saslUsers {
		if strings.Contains(log, passFor(client)) {
			t.Errorf("the gateway logged %s's password", client)
		}
	}
	for _, secret := range []string{wrongPassword, "eyJ"} {
		if strings.Contains(log, secret) {
			t.Errorf("the gateway logged a secret (%q)", secret)
		}
	}
}

// advertiseSASLHandshakeV0 makes kfake list SaslHandshake from version 0
// in its ApiVersions answers, as Apache Kafka does (4.x too: KIP-896 kept
// v0 for kafka-python's sake). kfake lists v1 only, and the gateway passes
// the broker's range on to clients although it answers SaslHandshake
// itself, v0 included; librdkafka 2.0.2 refuses to authenticate ("SASL
// Handshake not supported by broker") unless v0 is listed.
func advertiseSASLHandshakeV0(t *testing.T, b *kfake.Cluster) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.ListenAddrs()...)) // ApiVersions needs no authentication
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrApiVersionsRequest()
	req.ClientSoftwareName, req.ClientSoftwareVersion = "strait-interop", "1"
	tmpl, err := req.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(tmpl.ErrorCode)
	}
	if err != nil {
		t.Fatalf("kfake ApiVersions: %v", err)
	}
	for i := range tmpl.ApiKeys {
		if tmpl.ApiKeys[i].ApiKey == int16(kmsg.SASLHandshake) {
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

// gatewayMechanism is the gateway's own identity at the broker.
func gatewayMechanism() kafkasasl.Mechanism {
	return scram.Auth{User: gatewayUser, Pass: gatewayPass}.AsSha512Mechanism()
}

// startSASLGateway starts a gateway named name in front of b that
// terminates SASL with mechs and logs in to b as gatewayUser, and returns
// its bootstrap address. It shuts down when the test ends.
func startSASLGateway(t *testing.T, name string, b *kfake.Cluster, mechs []sasl.Mechanism, log *slog.Logger,
	metrics *telemetry.KafkaMetrics, filters ...filter.Filter) string {
	t.Helper()
	base := testkit.PortBlock(t, nodePorts+1)
	vc, err := proxy.New(proxy.Options{
		Name:          name,
		Listen:        testkit.Addr(base),
		NodePortStart: base + 1,
		NodePortEnd:   base + nodePorts,
		Target:        proxy.Target{Bootstrap: b.ListenAddrs(), SASL: gatewayMechanism()},
		// A short failure delay and no failure budget: every client
		// here fails from 127.0.0.1, and is meant to.
		SASL:    &proxy.SASL{Mechanisms: mechs, FailureDelay: 10 * time.Millisecond},
		Log:     log.With("vc", name),
		Metrics: metrics,
		Filters: filters,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := vc.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := vc.Shutdown(ctx); err != nil {
			t.Logf("gateway %s shutdown: %v", name, err)
		}
	})
	waitNodeListeners(t, base, nil)
	return vc.Addr().String()
}

// createTopic creates topic on the broker directly.
func (e *saslEnv) createTopic(t *testing.T, topic string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	createTopicN(ctx, t, e.admin, topic, saslPartitions)
}

// producePrincipals is a filter that records, per topic, the principals of
// the Produce requests the gateway passes on.
type producePrincipals struct {
	mu      sync.Mutex
	byTopic map[string]map[string]bool
}

func (*producePrincipals) Name() string { return "produce-principals" }

func (*producePrincipals) Interest() filter.Interest {
	return filter.Interest{Requests: filter.Keys(wire.KeyProduce)}
}

func (p *producePrincipals) OnRequest(c *filter.Context, req *filter.Request) error {
	r, ok := req.Body.(*kmsg.ProduceRequest)
	if !ok {
		return nil
	}
	principal := c.Principal()
	topics := make([]string, 0, len(r.Topics))
	for _, tp := range r.Topics {
		name := tp.Topic
		if name == "" { // Produce v13+ names topics by id
			if n, err := c.TopicName(tp.TopicID); err == nil {
				name = n
			}
		}
		topics = append(topics, name)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.byTopic == nil {
		p.byTopic = map[string]map[string]bool{}
	}
	for _, topic := range topics {
		if p.byTopic[topic] == nil {
			p.byTopic[topic] = map[string]bool{}
		}
		p.byTopic[topic][principal] = true
	}
	req.Unchanged()
	return nil
}

// of returns the principals seen producing to topic, sorted.
func (p *producePrincipals) of(topic string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var seen []string
	for principal := range p.byTopic[topic] {
		seen = append(seen, principal)
	}
	slices.Sort(seen)
	return seen
}

var _ filter.RequestHandler = (*producePrincipals)(nil)

// checkPrincipal checks that every Produce to topic carried principal want,
// as filters see it.
func checkPrincipal(t *testing.T, e *saslEnv, topic, want string) {
	t.Helper()
	got := e.seen.of(topic)
	if len(got) != 1 || got[0] != want {
		t.Errorf("filters saw Produce requests to %s from principals %q, want only %q", topic, got, want)
	}
}

// tokenIssuer signs bearer tokens with an RSA key whose public half is in
// jwksFile, the key set the gateway reads.
type tokenIssuer struct {
	key      *rsa.PrivateKey
	jwksFile string
}

func newTokenIssuer(t *testing.T, dir string) *tokenIssuer {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	b64 := base64.RawURLEncoding.EncodeToString
	set, err := json.Marshal(map[string]any{"keys": []map[string]string{{
		"kty": "RSA", "kid": tokenKeyID, "alg": "RS256", "use": "sig",
		"n": b64(key.N.Bytes()), "e": b64(big.NewInt(int64(key.E)).Bytes()),
	}}})
	if err != nil {
		t.Fatal(err)
	}
	i := &tokenIssuer{key: key, jwksFile: filepath.Join(dir, "jwks.json")}
	if err := os.WriteFile(i.jwksFile, set, 0o600); err != nil {
		t.Fatal(err)
	}
	return i
}

// token returns an RS256 JWT for sub, issued an hour before exp.
func (i *tokenIssuer) token(t *testing.T, sub string, exp time.Time) string {
	t.Helper()
	part := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return base64.RawURLEncoding.EncodeToString(b)
	}
	signed := part(map[string]string{"alg": "RS256", "typ": "JWT", "kid": tokenKeyID}) + "." + part(map[string]any{
		"iss": tokenIssuerURL, "aud": tokenAudience, "sub": sub,
		"iat": exp.Add(-time.Hour).Unix(), "exp": exp.Unix(),
	})
	sum := sha256.Sum256([]byte(signed))
	sig, err := rsa.SignPKCS1v15(nil, i.key, crypto.SHA256, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	return signed + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// saslCreds are what a client authenticates with.
type saslCreds struct {
	mechanism  string
	user, pass string
	// token is the bearer token of OAUTHBEARER (none: the client's own
	// unsecured JWT); tokenExpiry is the expiry librdkafka's oauth_cb
	// reports with it. librdkafka refuses to send a token it is told has
	// expired, so for the expired token it is told a later one, and the
	// gateway has to refuse it.
	token       string
	tokenExpiry time.Time
}

// saslClient is a client under test.
type saslClient struct {
	name string
	// need skips the test (or fails it, with STRAIT_REQUIRE_INTEROP=1)
	// when the client is not installed.
	need func(t *testing.T)
	// mechanisms are those it round-trips with a password.
	mechanisms []string
	// oauth is what it can do with OAUTHBEARER.
	oauth oauthSupport
	// librdkafka, if set, returns the version of librdkafka the client
	// runs on.
	librdkafka func(t *testing.T) [3]int
	// roundTrip produces recs to topic at addr and consumes them back,
	// returning how many were acknowledged and what was consumed.
	roundTrip func(t *testing.T, e *saslEnv, c saslCreds, topic string, recs []record) (int, []record)
	// refused tries to produce one record to topic at addr with
	// credentials it must be refused, and returns what the client told
	// the application.
	refused func(t *testing.T, e *saslEnv, addr string, c saslCreds, topic string) []string
	// want is, per refusal, what the application must be told (every
	// error reported must match).
	want map[string]*regexp.Regexp
}

// oauthSupport is what a client can do with OAUTHBEARER.
type oauthSupport int

const (
	oauthNone oauthSupport = iota
	// oauthToken: the application hands the client a token (the
	// issuer's, signed).
	oauthToken
	// oauthUnsecured: the client sends only tokens it makes itself,
	// unsigned (librdkafka's unsecured JWT, in kcat).
	oauthUnsecured
)

// Refusals, the keys of saslClient.want.
const (
	refusedPlain    = "wrong-password/PLAIN"
	refusedSCRAM    = "wrong-password/SCRAM-SHA-512"
	refusedMech     = "unknown-mechanism"
	refusedExpired  = "expired-token"
	refusedUnsigned = "unsigned-token"
	// refusedExpiredLocally: an expired token the client is told has
	// expired.
	refusedExpiredLocally = "expired-token/expiry-told"
	// refusedSCRAMNonce: a right password with librdkafka before 2.6.1,
	// whose SCRAM client-final-message repeats the client nonce.
	refusedSCRAMNonce = "librdkafka-scram-nonce"
)

// Messages, as each client words them, that recur below.
const (
	// The gateway's answer to a wrong password, whatever the mechanism
	// (sasl.ErrAuthFailed).
	invalidCredentials = `authentication failed: invalid credentials`
	// The gateway's answer to a token that expired.
	tokenExpired = invalidCredentials + `: token expired: at \S+ \(clock skew 30s\)`
	// librdkafka names the broker connection and says how long it took.
	librdkafkaAuthFailed = `sasl_plaintext://127\.0\.0\.1:\d+/bootstrap: SASL authentication error: ` + invalidCredentials
	librdkafkaNoPLAIN    = `sasl_plaintext://127\.0\.0\.1:\d+/bootstrap: SASL PLAIN mechanism handshake failed: ` +
		`Broker: Unsupported SASL mechanism: broker's supported mechanisms: SCRAM-SHA-512 \(after \d+ms in state AUTH_HANDSHAKE\)`
	librdkafkaAfter = ` \(after \d+ms in state AUTH_REQ\)`
	// sarama's error when no bootstrap broker would have it.
	saramaNoBrokers = `kafka: client has run out of available brokers to talk to`
)

func mustRE(expr string) *regexp.Regexp { return regexp.MustCompile("^" + expr + "$") }

var saslClients = []saslClient{
	{
		name:       "franz-go",
		need:       func(*testing.T) {},
		mechanisms: []string{mechPlain, mechSCRAM256, mechSCRAM512},
		oauth:      oauthToken,
		roundTrip:  franzSASLRoundTrip,
		refused:    franzSASLRefused,
		want: map[string]*regexp.Regexp{
			refusedPlain:   mustRE(`SASL_AUTHENTICATION_FAILED: SASL Authentication failed\.: ` + invalidCredentials),
			refusedSCRAM:   mustRE(`SASL_AUTHENTICATION_FAILED: SASL Authentication failed\.: ` + invalidCredentials),
			refusedMech:    mustRE(`UNSUPPORTED_SASL_MECHANISM: The broker does not support the requested SASL mechanism\.`),
			refusedExpired: mustRE(`SASL_AUTHENTICATION_FAILED: SASL Authentication failed\.: ` + tokenExpired),
		},
	},
	{
		name:       "sarama",
		need:       func(*testing.T) {},
		mechanisms: []string{mechPlain, mechSCRAM256, mechSCRAM512},
		oauth:      oauthToken,
		roundTrip:  saramaSASLRoundTrip(false),
		refused:    saramaSASLRefused(false),
		want: map[string]*regexp.Regexp{
			refusedPlain: mustRE(saramaNoBrokers + `: kafka server: SASL Authentication failed: ` + invalidCredentials),
			refusedSCRAM: mustRE(saramaNoBrokers + `: kafka server: SASL Authentication failed: ` + invalidCredentials),
			// sarama drops the handshake's error.
			refusedMech:    mustRE(saramaNoBrokers),
			refusedExpired: mustRE(saramaNoBrokers + `: kafka server: SASL Authentication failed: ` + tokenExpired),
		},
	},
	{
		// sarama told to authenticate as Kafka 0.10 clients did:
		// SaslHandshake v0, then raw tokens (no OAUTHBEARER that way).
		name:       "sarama-v0",
		need:       func(*testing.T) {},
		mechanisms: []string{mechPlain, mechSCRAM512},
		roundTrip:  saramaSASLRoundTrip(true),
		refused:    saramaSASLRefused(true),
		want: map[string]*regexp.Regexp{
			// Raw tokens cannot carry an error: the connection closes.
			refusedPlain: mustRE(saramaNoBrokers + `: EOF`),
			refusedSCRAM: mustRE(saramaNoBrokers + `: EOF`),
			refusedMech:  mustRE(saramaNoBrokers),
		},
	},
	{
		name:       "kcat",
		need:       needKcat,
		mechanisms: []string{mechPlain, mechSCRAM512},
		oauth:      oauthUnsecured,
		librdkafka: kcatLibrdkafka,
		roundTrip:  kcatSASLRoundTrip,
		refused:    kcatSASLRefused,
		want: map[string]*regexp.Regexp{
			refusedPlain:      mustRE(`% ERROR: Local: Authentication failure: ` + librdkafkaAuthFailed + librdkafkaAfter),
			refusedSCRAM:      mustRE(`% ERROR: Local: Authentication failure: ` + librdkafkaAuthFailed + librdkafkaAfter),
			refusedSCRAMNonce: mustRE(`% ERROR: Local: Authentication failure: ` + librdkafkaAuthFailed + librdkafkaAfter),
			refusedMech:       mustRE(`% ERROR: Local: Authentication failure: ` + librdkafkaNoPLAIN),
			refusedUnsigned: mustRE(`% ERROR: Local: Authentication failure: ` + librdkafkaAuthFailed +
				`: signature algorithm not allowed: "none" \(the algorithms allowed are [A-Z0-9, a-z]+\)` + librdkafkaAfter),
		},
	},
	{
		name:       "kafka-python",
		need:       func(t *testing.T) { needPython(t, "kafka", "python3-kafka") },
		mechanisms: []string{mechPlain, mechSCRAM512},
		oauth:      oauthToken,
		roundTrip:  scriptSASLRoundTrip(pythonBin(), "py/kafka_python_sasl.py"),
		refused:    scriptSASLRefused(pythonBin(), "py/kafka_python_sasl.py"),
		want: map[string]*regexp.Regexp{
			// After SaslHandshake v0 a refusal can only close the
			// connection; the producer then finds no broker.
			refusedPlain: mustRE(`NoBrokersAvailable: NoBrokersAvailable`),
			refusedSCRAM: mustRE(`NoBrokersAvailable: NoBrokersAvailable`),
			refusedMech:  mustRE(`NoBrokersAvailable: NoBrokersAvailable`),
			// The error status comes back as a raw token where
			// kafka-python wants an empty one.
			refusedExpired: mustRE(`AuthenticationFailedError: AuthenticationFailedError: Unrecognized response during authentication`),
		},
	},
	{
		name:       "confluent-kafka-python",
		need:       func(t *testing.T) { needPython(t, "confluent_kafka", "python3-confluent-kafka") },
		mechanisms: []string{mechPlain, mechSCRAM512},
		oauth:      oauthToken,
		librdkafka: confluentLibrdkafka,
		roundTrip:  scriptSASLRoundTrip(pythonBin(), "py/confluent_kafka_sasl.py"),
		refused:    scriptSASLRefused(pythonBin(), "py/confluent_kafka_sasl.py"),
		want: map[string]*regexp.Regexp{
			refusedPlain:      mustRE(`_AUTHENTICATION: ` + librdkafkaAuthFailed + librdkafkaAfter),
			refusedSCRAM:      mustRE(`_AUTHENTICATION: ` + librdkafkaAuthFailed + librdkafkaAfter),
			refusedSCRAMNonce: mustRE(`_AUTHENTICATION: ` + librdkafkaAuthFailed + librdkafkaAfter),
			refusedMech:       mustRE(`_AUTHENTICATION: ` + librdkafkaNoPLAIN),
			refusedExpired:    mustRE(`_AUTHENTICATION: ` + librdkafkaAuthFailed + `: token expired: at \S+ \(clock skew 30s\)` + librdkafkaAfter),
			// Told the token's own expiry, librdkafka keeps the token
			// to itself and poll raises.
			refusedExpiredLocally: mustRE(`ValueError: Must supply an unexpired token: now=\d+ms, exp=\d+ms`),
		},
	},
	{
		name:       "kafkajs",
		need:       needKafkaJS,
		mechanisms: []string{mechPlain, mechSCRAM512},
		oauth:      oauthToken,
		roundTrip:  scriptSASLRoundTrip("node", "node/sasl.js"),
		refused:    scriptSASLRefused("node", "node/sasl.js"),
		want: map[string]*regexp.Regexp{
			refusedPlain: mustRE(`KafkaJSSASLAuthenticationError: SASL PLAIN authentication failed: ` + invalidCredentials),
			refusedSCRAM: mustRE(`KafkaJSSASLAuthenticationError: SASL SCRAM SHA512 authentication failed: ` + invalidCredentials),
			refusedMech:  mustRE(`KafkaJSProtocolError: The broker does not support the requested SASL mechanism \(UNSUPPORTED_SASL_MECHANISM\)`),
			// kafkajs takes the error status for success and sends
			// Metadata, which the gateway refuses by closing the
			// connection (reset, when a request it never read was
			// pipelined behind); it retries until it gives up.
			refusedExpired: mustRE(`KafkaJSNumberOfRetriesExceeded: (Closed connection|Connection error: read ECONNRESET)`),
		},
	},
}

// saslTopic is the topic of one client's round trip with one mechanism.
func saslTopic(client, mechanism string) string {
	return "sasl-" + client + "-" + strings.ToLower(mechanism)
}

// saslRoundTrip has client produce and consume through e's gateway with c,
// and checks the records and the principal filters saw.
func saslRoundTrip(t *testing.T, e *saslEnv, client saslClient, c saslCreds, principal string) {
	t.Helper()
	topic := saslTopic(client.name, c.mechanism)
	e.createTopic(t, topic)
	recs := makeRecords(recordSpec{prefix: topic, n: saslRecords, text: true})
	start := time.Now()
	produced, consumed := client.roundTrip(t, e, c, topic, recs)
	t.Logf("%s with %s: produced %d, consumed %d in %s", client.name, c.mechanism, produced, len(consumed),
		time.Since(start).Round(time.Millisecond))
	if produced != len(recs) {
		t.Errorf("%s acknowledged %d of %d records produced", client.name, produced, len(recs))
	}
	verify(t, recs, consumed, checkOpts{})
	checkPrincipal(t, e, topic, principal)
}

// checkRefused runs one refusal and checks what the client reported.
func checkRefused(t *testing.T, e *saslEnv, client saslClient, refusal, addr string, c saslCreds) {
	t.Helper()
	topic := "sasl-refused"
	start := time.Now()
	got := client.refused(t, e, addr, c, topic)
	t.Logf("%s, %s: told %q after %s", client.name, refusal, got, time.Since(start).Round(time.Millisecond))
	want := client.want[refusal]
	if len(got) == 0 {
		t.Errorf("%s, %s: the application was told of no error", client.name, refusal)
	}
	for _, msg := range got {
		if !want.MatchString(msg) {
			t.Errorf("%s, %s: the application was told %q, want a message matching %s", client.name, refusal, msg, want)
		}
	}
	if seen := e.seen.of(topic); len(seen) > 0 {
		t.Errorf("%s, %s: a Produce request reached the filters (principals %q)", client.name, refusal, seen)
	}
}

// TestSASL has every client authenticate to the gateway with PLAIN and
// SCRAM-SHA-512 (franz-go and sarama with SCRAM-SHA-256 too), produce and
// consume, while the gateway authenticates to the broker as itself with
// SCRAM-SHA-512; the filters see the client's user as its principal.
//
// librdkafka before 2.6.1 repeats the client nonce in its SCRAM
// client-final-message (librdkafka#4895). The gateway accepts that one
// form by default (the proof still binds the server's nonce) and logs it;
// a gateway that checks the nonce strictly, as Kafka 4 does, refuses it
// the way it refuses a wrong password.
func TestSASL(t *testing.T) {
	t.Parallel()
	e := startSASLEnv(t)
	for _, client := range saslClients {
		for _, mech := range client.mechanisms {
			t.Run(client.name+"/"+mech, func(t *testing.T) {
				client.need(t)
				t.Parallel()
				c := saslCreds{mechanism: mech, user: userFor(client.name), pass: passFor(client.name)}
				saslRoundTrip(t, e, client, c, userFor(client.name))
				if mech == mechSCRAM512 && client.librdkafka != nil {
					if v := client.librdkafka(t); olderVersion(v, librdkafkaSCRAMFixed) {
						t.Logf("librdkafka %d.%d.%d sends the SCRAM nonce of librdkafka#4895", v[0], v[1], v[2])
						if !legacyNonceLogged(e.logs.String(), userFor(client.name)) {
							t.Errorf("%s: the gateway did not log that %s sent librdkafka's old SCRAM nonce", client.name, userFor(client.name))
						}
						checkRefused(t, e, client, refusedSCRAMNonce, e.scramOnlyAddr, c)
					}
				}
			})
		}
	}
}

// legacyNonceLogged reports whether the gateway's log says user
// authenticated with librdkafka's old SCRAM nonce.
func legacyNonceLogged(log, user string) bool {
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "principal="+user+" ") && strings.Contains(line, "legacy_scram_nonce=true") {
			return true
		}
	}
	return false
}

// librdkafkaSCRAMFixed is the first librdkafka whose SCRAM
// client-final-message carries the nonce the server sent, once.
var librdkafkaSCRAMFixed = [3]int{2, 6, 1}

func olderVersion(v, than [3]int) bool {
	for i := range v {
		if v[i] != than[i] {
			return v[i] < than[i]
		}
	}
	return false
}

var librdkafkaVersionRE = regexp.MustCompile(`librdkafka (\d+)\.(\d+)\.(\d+)`)

// librdkafkaVersion runs a command that prints "librdkafka X.Y.Z" and
// returns the version.
func librdkafkaVersion(t *testing.T, name string, args ...string) [3]int {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	m := librdkafkaVersionRE.FindSubmatch(out)
	if err != nil || m == nil {
		t.Fatalf("%s %s printed no librdkafka version (%v):\n%s", name, strings.Join(args, " "), err, out)
	}
	var v [3]int
	for i := range v {
		v[i], _ = strconv.Atoi(string(m[i+1]))
	}
	return v
}

func kcatLibrdkafka(t *testing.T) [3]int { return librdkafkaVersion(t, "kcat", "-V") }

func confluentLibrdkafka(t *testing.T) [3]int {
	return librdkafkaVersion(t, pythonBin(), "-c", "import confluent_kafka; print('librdkafka', confluent_kafka.libversion()[0])")
}

// TestSASLOAuthBearer has every client that takes a token from the
// application authenticate with one signed by the issuer whose key set the
// gateway reads, produce and consume (the filters see the token's sub), and
// then be refused a token that expired an hour ago. kcat, which can send
// only librdkafka's own unsigned tokens, is refused those.
func TestSASLOAuthBearer(t *testing.T) {
	t.Parallel()
	e := startSASLEnv(t)
	for _, client := range saslClients {
		if client.oauth == oauthNone {
			continue
		}
		t.Run(client.name, func(t *testing.T) {
			client.need(t)
			t.Parallel()
			if client.oauth == oauthUnsecured {
				checkRefused(t, e, client, refusedUnsigned, e.addr, saslCreds{mechanism: mechOAuthBearer})
				return
			}
			sub := subjectFor(client.name)
			valid := saslCreds{mechanism: mechOAuthBearer,
				token: e.issuer.token(t, sub, time.Now().Add(10*time.Minute)), tokenExpiry: time.Now().Add(10 * time.Minute)}
			saslRoundTrip(t, e, client, valid, sub)
			expired := saslCreds{mechanism: mechOAuthBearer,
				token: e.issuer.token(t, sub, time.Now().Add(-time.Hour)), tokenExpiry: time.Now().Add(time.Minute)}
			checkRefused(t, e, client, refusedExpired, e.addr, expired)
			if _, ok := client.want[refusedExpiredLocally]; ok {
				expired.tokenExpiry = time.Now().Add(-time.Hour)
				checkRefused(t, e, client, refusedExpiredLocally, e.addr, expired)
			}
		})
	}
}

// TestSASLRefused has every client authenticate with a wrong password
// (PLAIN and SCRAM-SHA-512) and ask a listener that offers SCRAM-SHA-512
// only for PLAIN, and checks what each tells the application.
func TestSASLRefused(t *testing.T) {
	t.Parallel()
	e := startSASLEnv(t)
	for _, client := range saslClients {
		t.Run(client.name, func(t *testing.T) {
			client.need(t)
			t.Parallel()
			user := userFor(client.name)
			checkRefused(t, e, client, refusedPlain, e.addr, saslCreds{mechanism: mechPlain, user: user, pass: wrongPassword})
			checkRefused(t, e, client, refusedSCRAM, e.addr, saslCreds{mechanism: mechSCRAM512, user: user, pass: wrongPassword})
			checkRefused(t, e, client, refusedMech, e.scramOnlyAddr, saslCreds{mechanism: mechPlain, user: user, pass: passFor(client.name)})
		})
	}
}

// franzMechanism is franz-go's mechanism for c.
func franzMechanism(c saslCreds) kafkasasl.Mechanism {
	switch c.mechanism {
	case mechPlain:
		return plain.Auth{User: c.user, Pass: c.pass}.AsMechanism()
	case mechSCRAM256:
		return scram.Auth{User: c.user, Pass: c.pass}.AsSha256Mechanism()
	case mechSCRAM512:
		return scram.Auth{User: c.user, Pass: c.pass}.AsSha512Mechanism()
	}
	return franzoauth.Auth{Token: c.token}.AsMechanism()
}

func franzSASLRoundTrip(t *testing.T, e *saslEnv, c saslCreds, topic string, recs []record) (int, []record) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), saslClientTimeout)
	defer cancel()
	base := []kgo.Opt{kgo.SeedBrokers(e.addr), kgo.ClientID("strait-interop-franz"), kgo.SASL(franzMechanism(c))}
	prod, err := kgo.NewClient(append(base, kgo.DefaultProduceTopic(topic))...)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	var krecs []*kgo.Record
	for _, r := range recs {
		krecs = append(krecs, &kgo.Record{Key: r.Key, Value: r.Value})
	}
	produced := 0
	for _, res := range prod.ProduceSync(ctx, krecs...) {
		if res.Err != nil {
			t.Errorf("produce: %v", res.Err)
			continue
		}
		produced++
	}
	cons, err := kgo.NewClient(append(base, kgo.ConsumeTopics(topic), kgo.ConsumerGroup(topic+"-g"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	var got []record
	for len(got) < len(recs) && ctx.Err() == nil {
		fs := cons.PollFetches(ctx)
		fs.EachError(func(tp string, p int32, err error) {
			if ctx.Err() == nil {
				t.Errorf("fetch %s/%d: %v", tp, p, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			got = append(got, record{Key: r.Key, Value: r.Value, Partition: r.Partition, Offset: r.Offset})
		})
	}
	return produced, got
}

// franzSASLRefused reports what Ping returns, and checks that a produce
// meanwhile just waits: franz-go keeps retrying the connection while a
// record's context lasts, and never hands the refusal to the producer.
func franzSASLRefused(t *testing.T, e *saslEnv, addr string, c saslCreds, topic string) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ClientID("strait-interop-franz"), kgo.SASL(franzMechanism(c)),
		kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("franz-go produce with refused credentials: %v, want the context's deadline", err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.Ping(ctx); err != nil {
		return []string{err.Error()}
	}
	return nil
}

// saramaSCRAM is sarama's SCRAM client, over xdg-go/scram: sarama has
// none of its own and takes one through SCRAMClientGeneratorFunc.
type saramaSCRAM struct {
	hash xdgscram.HashGeneratorFcn
	conv *xdgscram.ClientConversation
}

func (s *saramaSCRAM) Begin(user, pass, authzID string) error {
	cl, err := s.hash.NewClient(user, pass, authzID)
	if err != nil {
		return err
	}
	s.conv = cl.NewConversation()
	return nil
}

func (s *saramaSCRAM) Step(challenge string) (string, error) { return s.conv.Step(challenge) }
func (s *saramaSCRAM) Done() bool                            { return s.conv.Done() }

// saramaToken hands sarama the one token the test signed.
type saramaToken string

func (s saramaToken) Token() (*sarama.AccessToken, error) {
	return &sarama.AccessToken{Token: string(s)}, nil
}

// saramaSASLConfig is sarama's config for c; v0 makes it authenticate
// with SaslHandshake v0 and raw tokens, which needs ApiVersions off.
func saramaSASLConfig(c saslCreds, v0 bool) *sarama.Config {
	cfg := saramaConfig(sarama.V2_8_0_0, nil)
	cfg.Net.SASL.Enable = true
	cfg.Net.SASL.Mechanism = sarama.SASLMechanism(c.mechanism)
	cfg.Net.SASL.User, cfg.Net.SASL.Password = c.user, c.pass
	switch c.mechanism {
	case mechSCRAM256:
		cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &saramaSCRAM{hash: xdgscram.SHA256} }
	case mechSCRAM512:
		cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &saramaSCRAM{hash: xdgscram.SHA512} }
	case mechOAuthBearer:
		cfg.Net.SASL.TokenProvider = saramaToken(c.token)
	}
	if v0 {
		cfg.Net.SASL.Version = sarama.SASLHandshakeV0
		cfg.ApiVersionsRequest = false
	}
	return cfg
}

func saramaSASLRoundTrip(v0 bool) func(*testing.T, *saslEnv, saslCreds, string, []record) (int, []record) {
	return func(t *testing.T, e *saslEnv, c saslCreds, topic string, recs []record) (int, []record) {
		t.Helper()
		pcfg := saramaSASLConfig(c, v0)
		pcfg.Producer.RequiredAcks = sarama.WaitForAll
		pcfg.Producer.Return.Successes = true
		pcfg.Producer.Partitioner = sarama.NewHashPartitioner
		prod, err := sarama.NewSyncProducer([]string{e.addr}, pcfg)
		if err != nil {
			t.Fatalf("sarama producer: %v", err)
		}
		var msgs []*sarama.ProducerMessage
		for _, r := range recs {
			msgs = append(msgs, &sarama.ProducerMessage{Topic: topic, Key: sarama.ByteEncoder(r.Key), Value: sarama.ByteEncoder(r.Value)})
		}
		produced := len(msgs)
		if err := prod.SendMessages(msgs); err != nil {
			t.Errorf("produce: %v", err)
			var perrs sarama.ProducerErrors
			if errors.As(err, &perrs) {
				produced -= len(perrs)
			}
		}
		if err := prod.Close(); err != nil {
			t.Error(err)
		}

		ccfg := saramaSASLConfig(c, v0)
		ccfg.Consumer.Offsets.Initial = sarama.OffsetOldest
		ccfg.Consumer.Offsets.AutoCommit.Enable = false
		group, err := sarama.NewConsumerGroup([]string{e.addr}, topic+"-g", ccfg)
		if err != nil {
			t.Fatalf("sarama consumer group: %v", err)
		}
		defer group.Close()
		ctx, cancel := context.WithTimeout(context.Background(), saslClientTimeout)
		defer cancel()
		h := &saramaHandler{want: len(recs), done: cancel}
		for ctx.Err() == nil {
			if err := group.Consume(ctx, []string{topic}, h); err != nil && ctx.Err() == nil {
				t.Fatalf("consume: %v", err)
			}
		}
		return produced, h.records()
	}
}

func saramaSASLRefused(v0 bool) func(*testing.T, *saslEnv, string, saslCreds, string) []string {
	return func(t *testing.T, e *saslEnv, addr string, c saslCreds, topic string) []string {
		t.Helper()
		cfg := saramaSASLConfig(c, v0)
		cfg.Producer.Return.Successes = true
		cfg.Metadata.Retry.Max = 1
		cfg.Metadata.Retry.Backoff = 100 * time.Millisecond
		prod, err := sarama.NewSyncProducer([]string{addr}, cfg)
		if err != nil {
			return []string{err.Error()}
		}
		defer prod.Close()
		if _, _, err := prod.SendMessage(&sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder("v")}); err != nil {
			return []string{err.Error()}
		}
		return nil
	}
}

// kcatSASLArgs are kcat's options for c.
func kcatSASLArgs(c saslCreds) []string {
	args := []string{"-X", "client.id=strait-interop-kcat", "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=" + c.mechanism}
	if c.mechanism == mechOAuthBearer {
		// librdkafka's own unsecured JWT (alg none): kcat has no way to
		// send a token of an issuer's, and Debian's librdkafka 2.0.2 is
		// built without the OIDC method.
		return append(args, "-X", "enable.sasl.oauthbearer.unsecure.jwt=true",
			"-X", "sasl.oauthbearer.config=principal="+subjectFor("kcat"))
	}
	return append(args, "-X", "sasl.username="+c.user, "-X", "sasl.password="+c.pass)
}

func kcatSASLRoundTrip(t *testing.T, e *saslEnv, c saslCreds, topic string, recs []record) (int, []record) {
	t.Helper()
	var in bytes.Buffer
	for _, r := range recs {
		fmt.Fprintf(&in, "%s:%s\n", r.Key, r.Value)
	}
	sec := kcatSASLArgs(c)
	// kcat exits non-zero if a record is not delivered.
	runClient(t, in.Bytes(), "kcat", append([]string{"-P", "-b", e.addr, "-t", topic, "-K", ":", "-X", "acks=all"}, sec...)...)
	out := runClient(t, nil, "kcat", append([]string{"-C", "-b", e.addr, "-t", topic, "-o", "beginning", "-e", "-J", "-q"}, sec...)...)
	return len(recs), parseKcatJSON(t, out)
}

func kcatSASLRefused(t *testing.T, e *saslEnv, addr string, c saslCreds, topic string) []string {
	t.Helper()
	stop := func(stderr string) bool { return len(matchingLines(stderr, "% ERROR")) > 0 }
	_, errOut := runUntil(t, strings.NewReader("k:v\n"), stop, nil, "kcat",
		append([]string{"-P", "-b", addr, "-t", topic, "-K", ":"}, kcatSASLArgs(c)...)...)
	// The first error is the refusal; kcat then gives up, saying so
	// ("All broker connections are down ... terminating").
	errs := matchingLines(errOut, "% ERROR")
	return errs[:min(len(errs), 1)]
}

// saslScriptSpec is what py/*_sasl.py and node/sasl.js are told to do.
type saslScriptSpec struct {
	Bootstrap string `json:"bootstrap"`
	// Mode is "roundtrip" or "refused".
	Mode      string `json:"mode"`
	Mechanism string `json:"mechanism"`
	Username  string `json:"username,omitempty"`
	Password  string `json:"password,omitempty"`
	Token     string `json:"token,omitempty"`
	// TokenExpiry is the expiry the client is told, in Unix seconds.
	TokenExpiry float64  `json:"token_expiry,omitempty"`
	Topic       string   `json:"topic"`
	Group       string   `json:"group"`
	TimeoutSec  int      `json:"timeout_s"`
	Records     []record `json:"records,omitempty"`
}

// runSASLScript runs a client script with spec and returns its result.
func runSASLScript(t *testing.T, cmd []string, spec saslScriptSpec) scriptResult {
	t.Helper()
	spec.TimeoutSec = int(saslClientTimeout / time.Second)
	b, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	specFile := filepath.Join(t.TempDir(), "spec.json")
	if err := os.WriteFile(specFile, b, 0o600); err != nil {
		t.Fatal(err)
	}
	out := runClient(t, nil, cmd[0], append(slices.Clone(cmd[1:]), specFile)...)
	var res scriptResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("%s printed no result (%v):\n%s", cmd[1], err, tail(string(out), 2000))
	}
	return res
}

func saslSpec(addr string, c saslCreds, mode, topic string) saslScriptSpec {
	s := saslScriptSpec{Bootstrap: addr, Mode: mode, Mechanism: c.mechanism, Username: c.user, Password: c.pass,
		Token: c.token, Topic: topic, Group: topic + "-g"}
	if !c.tokenExpiry.IsZero() {
		s.TokenExpiry = float64(c.tokenExpiry.UnixMilli()) / 1000
	}
	return s
}

func scriptSASLRoundTrip(cmd ...string) func(*testing.T, *saslEnv, saslCreds, string, []record) (int, []record) {
	return func(t *testing.T, e *saslEnv, c saslCreds, topic string, recs []record) (int, []record) {
		t.Helper()
		spec := saslSpec(e.addr, c, "roundtrip", topic)
		spec.Records = recs
		res := runSASLScript(t, cmd, spec)
		for _, msg := range res.Errors {
			t.Errorf("%s reported: %s", res.Client, msg)
		}
		return res.Produced, res.Consumed
	}
}

func scriptSASLRefused(cmd ...string) func(*testing.T, *saslEnv, string, saslCreds, string) []string {
	return func(t *testing.T, e *saslEnv, addr string, c saslCreds, topic string) []string {
		t.Helper()
		res := runSASLScript(t, cmd, saslSpec(addr, c, "refused", topic))
		if res.Produced > 0 {
			t.Errorf("%s produced %d records with credentials it should have been refused", res.Client, res.Produced)
		}
		return res.Errors
	}
}
