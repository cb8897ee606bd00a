package proxy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	kafkasasl "github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/straitgw/strait/internal/auth/sasl"
	"github.com/straitgw/strait/internal/testkit"
)

// mappedCluster is a broker that enforces ACLs: the gateway is a
// superuser, alice-up (alice's own identity) may write and describe
// alice-t only.
func mappedCluster() []kfake.Opt {
	allow := func(res kmsg.ACLResourceType, name string, op kmsg.ACLOperation) kfake.ACL {
		return kfake.ACL{Resource: res, Name: name, Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: op, Allow: true}
	}
	return []kfake.Opt{
		kfake.EnableSASL(), kfake.EnableACLs(),
		kfake.Superuser("SCRAM-SHA-512", "gw", "gw-secret"),
		kfake.User("SCRAM-SHA-512", "alice-up", "alice-up-secret",
			allow(kmsg.ACLResourceTypeTopic, "alice-t", kmsg.ACLOperationWrite),
			allow(kmsg.ACLResourceTypeTopic, "alice-t", kmsg.ACLOperationDescribe),
			allow(kmsg.ACLResourceTypeCluster, "kafka-cluster", kmsg.ACLOperationIdempotentWrite)),
		kfake.SeedTopics(1, "alice-t", "bob-t"),
	}
}

// withIdentity terminates PLAIN for alice and bob, authenticates the
// gateway as gw, and maps alice to alice-up with password alicePass.
func withIdentity(alicePass string, refuseUnmapped bool) func(*Options) {
	return func(o *Options) {
		o.SASL = &SASL{Mechanisms: []sasl.Mechanism{&testPlain{users: map[string]string{"alice": "a", "bob": "b"}}}}
		o.Target.SASL = scram.Auth{User: "gw", Pass: "gw-secret"}.AsSha512Mechanism()
		o.UpstreamIdentity = &UpstreamIdentity{
			Principals:     map[string]kafkasasl.Mechanism{"alice": scram.Auth{User: "alice-up", Pass: alicePass}.AsSha512Mechanism()},
			RefuseUnmapped: refuseUnmapped,
		}
	}
}

func produceAs(ctx context.Context, t *testing.T, addr, user, pass, topic string) error {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.SASL(plain.Auth{User: user, Pass: pass}.AsMechanism()),
		kgo.RecordRetries(2), kgo.RequestRetries(2))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return cl.ProduceSync(pctx, &kgo.Record{Topic: topic, Value: []byte("v")}).FirstErr()
}

// TestUpstreamIdentityMapping: the broker sees alice as alice-up, with
// alice-up's ACLs, on every broker connection of hers (bootstrap and
// nodes); bob, unmapped, goes as the gateway.
func TestUpstreamIdentityMapping(t *testing.T) {
	g := startGateway(t, withIdentity("alice-up-secret", false), mappedCluster()...)
	ctx := testCtx(t, 40*time.Second)
	if err := produceAs(ctx, t, g.addr, "alice", "a", "alice-t"); err != nil {
		t.Fatalf("alice to alice-t, which alice-up may write: %v", err)
	}
	// The gateway itself may write bob-t: only if alice went as herself
	// does the broker refuse her.
	err := produceAs(ctx, t, g.addr, "alice", "a", "bob-t")
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Errorf("alice to bob-t: %v, want the broker's TOPIC_AUTHORIZATION_FAILED for alice-up", err)
	}
	if err := produceAs(ctx, t, g.addr, "bob", "b", "bob-t"); err != nil {
		t.Errorf("bob (unmapped, so the gateway's identity) to bob-t: %v", err)
	}
}

// TestUpstreamIdentityRefusals: with unmapped principals refused, bob
// cannot authenticate; a mapping the broker refuses fails the client's
// authentication with a message that says so.
func TestUpstreamIdentityRefusals(t *testing.T) {
	g := startGateway(t, withIdentity("not-alice-up-secret", true), mappedCluster()...)
	for _, tc := range []struct{ user, pass, want string }{
		{"bob", "b", "has no identity toward the cluster"},
		{"alice", "a", "the cluster refused the credentials the gateway holds for principal alice"},
	} {
		c := dialRaw(t, g.addr)
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.Version, hs.Mechanism = 1, "PLAIN"
		if r := c.roundTrip(hs, 1).(*kmsg.SASLHandshakeResponse); r.ErrorCode != 0 {
			t.Fatalf("handshake: error %d", r.ErrorCode)
		}
		au := kmsg.NewPtrSASLAuthenticateRequest()
		au.Version, au.SASLAuthBytes = 2, []byte("\x00"+tc.user+"\x00"+tc.pass)
		resp := c.roundTrip(au, 2).(*kmsg.SASLAuthenticateResponse)
		if resp.ErrorCode != kerr.SaslAuthenticationFailed.Code || resp.ErrorMessage == nil || !strings.Contains(*resp.ErrorMessage, tc.want) {
			t.Errorf("%s: code %d message %v, want SASL_AUTHENTICATION_FAILED saying %q", tc.user, resp.ErrorCode, resp.ErrorMessage, tc.want)
		}
		c.Close()
	}
	if n := g.metric("strait_kafka_errors_total", "kind", errUpstreamAuth); n != 1 {
		t.Errorf("%v upstream_auth errors counted, want 1 (alice's refused mapping)", n)
	}
}

// TestUpstreamReauthentication: a broker that bounds SASL sessions
// (connections.max.reauth.ms) gets its sessions renewed by the gateway on
// long connections, between requests, and the client never notices.
func TestUpstreamReauthentication(t *testing.T) {
	var mu sync.Mutex
	handshakes := 0
	g := startGateway(t, func(o *Options) {
		o.SASL = &SASL{Mechanisms: []sasl.Mechanism{&testPlain{users: map[string]string{"alice": "a"}}}}
		o.Target.SASL = scram.Auth{User: "gw", Pass: "gw-secret"}.AsSha512Mechanism()
	}, kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-512", "gw", "gw-secret"), kfake.SeedTopics(1, "alice-t"),
		kfake.BrokerConfigs(map[string]string{"connections.max.reauth.ms": "400"}))
	g.broker.ControlKey(int16(kmsg.SASLHandshake), func(kmsg.Request) (kmsg.Response, error, bool) {
		g.broker.KeepControl()
		mu.Lock()
		handshakes++
		mu.Unlock()
		return nil, nil, false
	})
	ctx := testCtx(t, 40*time.Second)
	cl, err := kgo.NewClient(kgo.SeedBrokers(g.addr), kgo.DefaultProduceTopic("alice-t"),
		kgo.SASL(plain.Auth{User: "alice", Pass: "a"}.AsMechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var produced atomic.Int64
	for range 40 { // about 2 s: five session lifetimes
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", produced.Load(), err)
		}
		produced.Add(1)
		time.Sleep(50 * time.Millisecond)
	}
	renewed := g.metric("strait_kafka_upstream_reauthentications_total")
	opened := g.metric("strait_kafka_connections_total")
	mu.Lock()
	n := handshakes
	mu.Unlock()
	if renewed < 2 {
		t.Errorf("%v broker sessions renewed over five session lifetimes, want at least 2", renewed)
	}
	if float64(n) < opened+renewed {
		t.Errorf("the broker saw %d handshakes for %v connections and %v renewals", n, opened, renewed)
	}
}

// TestUpstreamIdentityCertificate: a principal named by a client
// certificate is known at connect time; its broker connections log in as
// its own user from the start, and an unmapped one is refused.
func TestUpstreamIdentityCertificate(t *testing.T) {
	ca := testkit.NewCA(t)
	g := startGateway(t, func(o *Options) {
		o.TLS = &tls.Config{
			Certificates: []tls.Certificate{ca.Issue(t, "gateway", x509.ExtKeyUsageServerAuth)},
			ClientCAs:    ca.Pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12,
		}
		o.CertPrincipal = func(c *x509.Certificate) (string, error) { return c.Subject.CommonName, nil }
		o.Target.SASL = scram.Auth{User: "gw", Pass: "gw-secret"}.AsSha512Mechanism()
		o.UpstreamIdentity = &UpstreamIdentity{
			Principals:     map[string]kafkasasl.Mechanism{"alice": scram.Auth{User: "alice-up", Pass: "alice-up-secret"}.AsSha512Mechanism()},
			RefuseUnmapped: true,
		}
	}, mappedCluster()...)
	ctx := testCtx(t, 40*time.Second)
	produce := func(cn, topic string) error {
		cl, err := kgo.NewClient(kgo.SeedBrokers(g.addr), kgo.RecordRetries(2), kgo.RequestRetries(2),
			kgo.DialTLSConfig(&tls.Config{RootCAs: ca.Pool, Certificates: []tls.Certificate{ca.Issue(t, cn, x509.ExtKeyUsageClientAuth)}}))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		return cl.ProduceSync(pctx, &kgo.Record{Topic: topic, Value: []byte("v")}).FirstErr()
	}
	if err := produce("alice", "alice-t"); err != nil {
		t.Fatalf("alice to alice-t: %v", err)
	}
	if err := produce("alice", "bob-t"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Errorf("alice to bob-t: %v, want the broker's TOPIC_AUTHORIZATION_FAILED for alice-up", err)
	}
	if err := produce("bob", "bob-t"); err == nil {
		t.Error("bob, unmapped where unmapped principals are refused, was served")
	}
}
