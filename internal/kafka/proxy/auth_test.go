package proxy

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/straitgw/strait/internal/auth/sasl"
	"github.com/straitgw/strait/internal/kafka/filter"
	"github.com/straitgw/strait/internal/kafka/wire"
	"github.com/straitgw/strait/internal/testkit"
)

// testPlain is a PLAIN mechanism over a fixed user table, standing in for
// the real ones (internal/auth/sasl) so that the proxy's stage is tested
// on its own. expiry, if set, is every session's credential expiry.
type testPlain struct {
	users  map[string]string
	expiry time.Duration
}

func (*testPlain) Name() string { return "PLAIN" }

func (m *testPlain) Start(context.Context, string) sasl.Exchange { return &plainExchange{m: m} }

type plainExchange struct {
	m    *testPlain
	res  sasl.Result
	done bool
}

func (e *plainExchange) Next(msg []byte) ([]byte, bool, error) {
	if e.done {
		return nil, true, sasl.ErrMalformed
	}
	e.done = true
	parts := bytes.Split(msg, []byte{0})
	if len(parts) != 3 {
		return nil, true, sasl.ErrMalformed
	}
	user, pass := string(parts[1]), string(parts[2])
	if want, ok := e.m.users[user]; !ok || want != pass {
		return nil, true, sasl.ErrAuthFailed
	}
	e.res = sasl.Result{Principal: user}
	if e.m.expiry > 0 {
		e.res.Expiry = time.Now().Add(e.m.expiry)
	}
	return nil, true, nil
}

func (e *plainExchange) Result() sasl.Result { return e.res }

// principals records the principal of every request a filter sees.
type principals struct {
	mu   sync.Mutex
	seen []string
}

func (*principals) Name() string { return "principals" }
func (*principals) Interest() filter.Interest {
	return filter.Interest{Requests: filter.Keys(wire.KeyMetadata, wire.KeyProduce)}
}
func (p *principals) OnRequest(c *filter.Context, req *filter.Request) error {
	p.mu.Lock()
	p.seen = append(p.seen, c.Principal())
	p.mu.Unlock()
	req.Unchanged()
	return nil
}

func saslGateway(t *testing.T, m sasl.Mechanism, mod func(*SASL)) (*gateway, *principals) {
	rec := &principals{}
	g := startGateway(t, func(o *Options) {
		o.SASL = &SASL{Mechanisms: []sasl.Mechanism{m}}
		if mod != nil {
			mod(o.SASL)
		}
		o.Filters = []filter.Filter{rec}
	}, kfake.SeedTopics(1, "alice-t"))
	return g, rec
}

// TestSASLTermination: franz-go authenticates with PLAIN to the gateway
// (the broker asks for none), produces, and the filters see the principal;
// a wrong password fails with SASL_AUTHENTICATION_FAILED.
func TestSASLTermination(t *testing.T) {
	g, rec := saslGateway(t, &testPlain{users: map[string]string{"alice": "secret"}}, nil)
	ctx := testCtx(t, 20*time.Second)
	cl, err := kgo.NewClient(kgo.SeedBrokers(g.addr), kgo.DefaultProduceTopic("alice-t"),
		kgo.SASL(plain.Auth{User: "alice", Pass: "secret"}.AsMechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("produce as alice: %v", err)
	}
	rec.mu.Lock()
	seen := append([]string(nil), rec.seen...)
	rec.mu.Unlock()
	if len(seen) == 0 {
		t.Fatal("the filter saw no request")
	}
	for _, p := range seen {
		if p != "alice" {
			t.Errorf("a filter saw principal %q, want alice", p)
		}
	}

	bad, err := kgo.NewClient(kgo.SeedBrokers(g.addr), kgo.SASL(plain.Auth{User: "alice", Pass: "wrong"}.AsMechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	err = bad.Ping(ctx)
	if !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Errorf("wrong password: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
	if n := g.metric("strait_kafka_authentications_total", "mechanism", "PLAIN", "outcome", "success"); n < 1 {
		t.Errorf("%v successful authentications counted", n)
	}
	if n := g.metric("strait_kafka_authentications_total", "mechanism", "PLAIN", "outcome", "failure"); n < 1 {
		t.Errorf("%v failed authentications counted", n)
	}
}

// TestSASLRawFlow drives the stage frame by frame: ApiVersions before
// authenticating is answered; another request before it gets
// SASL_AUTHENTICATION_FAILED and the connection closes; an unoffered
// mechanism is refused with the offered list; a v0 handshake is followed by
// raw tokens.
func TestSASLRawFlow(t *testing.T) {
	g, _ := saslGateway(t, &testPlain{users: map[string]string{"bob": "pw"}}, nil)

	c := dialRaw(t, g.addr)
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version = 3
	av.ClientSoftwareName, av.ClientSoftwareVersion = "t", "1"
	r0 := c.roundTrip(av, 1).(*kmsg.ApiVersionsResponse)
	if r0.ErrorCode != 0 || len(r0.ApiKeys) == 0 {
		t.Fatalf("ApiVersions before authenticating: error %d, %d keys", r0.ErrorCode, len(r0.ApiKeys))
	}
	// The gateway answers SASL itself: it offers the versions it reads,
	// v0 included (librdkafka needs it), whatever the broker lists.
	offered := map[int16][2]int16{}
	for _, k := range r0.ApiKeys {
		offered[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	if offered[wire.KeySASLHandshake] != [2]int16{0, 1} || offered[wire.KeySASLAuthenticate] != [2]int16{0, 2} {
		t.Errorf("ApiVersions offers SaslHandshake %v and SaslAuthenticate %v, want [0 1] and [0 2]",
			offered[wire.KeySASLHandshake], offered[wire.KeySASLAuthenticate])
	}
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, "SCRAM-SHA-512"
	r := c.roundTrip(hs, 2).(*kmsg.SASLHandshakeResponse)
	if r.ErrorCode != kerr.UnsupportedSaslMechanism.Code || strings.Join(r.SupportedMechanisms, ",") != "PLAIN" {
		t.Errorf("unoffered mechanism: error %d, offered %v", r.ErrorCode, r.SupportedMechanisms)
	}
	desc := kmsg.NewPtrDescribeClusterRequest()
	if resp := c.roundTrip(desc, 3).(*kmsg.DescribeClusterResponse); resp.ErrorCode != kerr.SaslAuthenticationFailed.Code {
		t.Errorf("a request before authenticating: error %d, want SASL_AUTHENTICATION_FAILED", resp.ErrorCode)
	}
	if _, err := c.readFrame(); err == nil {
		t.Error("the connection stayed open after a request before authenticating")
	}

	// SaslHandshake v0, then a raw PLAIN token, then ordinary requests.
	c = dialRaw(t, g.addr)
	hs = kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 0, "PLAIN"
	if r := c.roundTrip(hs, 4).(*kmsg.SASLHandshakeResponse); r.ErrorCode != 0 {
		t.Fatalf("v0 handshake: error %d", r.ErrorCode)
	}
	tok := []byte("\x00bob\x00pw")
	c.write(append(binary.BigEndian.AppendUint32(nil, uint32(len(tok))), tok...))
	var sz [4]byte
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(c, sz[:]); err != nil || binary.BigEndian.Uint32(sz[:]) != 0 {
		t.Fatalf("raw token answer of size %d, %v: want an empty raw frame", binary.BigEndian.Uint32(sz[:]), err)
	}
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 4
	if resp := c.roundTrip(md, 5).(*kmsg.MetadataResponse); len(resp.Brokers) == 0 {
		t.Error("Metadata after a v0 authentication has no brokers")
	}
}

// TestSASLSessionLifetime: SaslAuthenticate tells the client the session's
// lifetime, the earlier of the configured maximum and the credential's
// expiry (KIP-368); once it has passed without re-authentication, the
// next request closes the connection, and a re-authentication renews it.
func TestSASLSessionLifetime(t *testing.T) {
	g, _ := saslGateway(t, &testPlain{users: map[string]string{"bob": "pw"}, expiry: 400 * time.Millisecond},
		func(s *SASL) { s.MaxSessionLifetime = time.Hour })
	c := dialRaw(t, g.addr)
	authenticate := func(corr int32) int64 {
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.Version, hs.Mechanism = 1, "PLAIN"
		if r := c.roundTrip(hs, corr).(*kmsg.SASLHandshakeResponse); r.ErrorCode != 0 {
			t.Fatalf("handshake: error %d", r.ErrorCode)
		}
		au := kmsg.NewPtrSASLAuthenticateRequest()
		au.Version, au.SASLAuthBytes = 2, []byte("\x00bob\x00pw")
		r := c.roundTrip(au, corr+1).(*kmsg.SASLAuthenticateResponse)
		if r.ErrorCode != 0 {
			t.Fatalf("authenticate: error %d", r.ErrorCode)
		}
		return r.SessionLifetimeMillis
	}
	if ms := authenticate(1); ms <= 0 || ms > 400 {
		t.Errorf("session lifetime %d ms, want the token's 400 ms at most", ms)
	}
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 4
	c.roundTrip(md, 3)
	time.Sleep(500 * time.Millisecond)
	authenticate(4) // re-authentication renews the session
	c.roundTrip(md, 6)
	time.Sleep(500 * time.Millisecond)
	c.send(md, 7)
	if _, err := c.readFrame(); err == nil {
		t.Error("a request after the session expired was answered; want the connection closed")
	}
	if n := g.metric("strait_kafka_expired_sessions_total"); n != 1 {
		t.Errorf("%v expired sessions counted, want 1", n)
	}
}

// TestUpstreamIdentity: the broker demands SCRAM-SHA-512; clients
// authenticate to the gateway with PLAIN as alice, and the gateway to the
// broker as itself, on every broker connection and for its side client. A
// gateway with the wrong credentials cannot serve the client, and says why.
func TestUpstreamIdentity(t *testing.T) {
	up := func(pass string) func(*Options) {
		return func(o *Options) {
			o.SASL = &SASL{Mechanisms: []sasl.Mechanism{&testPlain{users: map[string]string{"alice": "secret"}}}}
			o.Target.SASL = scram.Auth{User: "gw", Pass: pass}.AsSha512Mechanism()
		}
	}
	kopts := []kfake.Opt{kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-512", "gw", "gw-secret"), kfake.SeedTopics(1, "alice-t")}
	g := startGateway(t, up("gw-secret"), kopts...)
	ctx := testCtx(t, 20*time.Second)
	cl, err := kgo.NewClient(kgo.SeedBrokers(g.addr), kgo.DefaultProduceTopic("alice-t"),
		kgo.SASL(plain.Auth{User: "alice", Pass: "secret"}.AsMechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("produce through a gateway with its own broker identity: %v", err)
	}
	if _, err := g.vc.Send(ctx, kmsg.NewPtrMetadataRequest()); err != nil {
		t.Errorf("the side client, as the gateway: %v", err)
	}

	wrong := startGatewayTo(t, g.broker.ListenAddrs(), func(o *Options) {
		up("not-it")(o)
		o.SkipBrokerDiscovery = true // the side client could not log in either
	})
	cl2, err := kgo.NewClient(kgo.SeedBrokers(wrong.addr), kgo.SASL(plain.Auth{User: "alice", Pass: "secret"}.AsMechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl2.Close()
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := cl2.Ping(pctx); err == nil {
		t.Error("a gateway with wrong broker credentials served a client")
	}
}

// TestCertPrincipal: over mutual TLS, the client's certificate names its
// principal; a certificate the mapping cannot name is refused.
func TestCertPrincipal(t *testing.T) {
	ca := testkit.NewCA(t)
	rec := &principals{}
	g := startGateway(t, func(o *Options) {
		o.TLS = &tls.Config{
			Certificates: []tls.Certificate{ca.Issue(t, "gateway", x509.ExtKeyUsageServerAuth)},
			ClientCAs:    ca.Pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12,
		}
		o.CertPrincipal = func(c *x509.Certificate) (string, error) {
			if !strings.HasPrefix(c.Subject.CommonName, "app-") {
				return "", errors.New("no rule matches")
			}
			return "svc:" + c.Subject.CommonName, nil
		}
		o.Filters = []filter.Filter{rec}
	}, kfake.SeedTopics(1, "t"))
	ctx := testCtx(t, 20*time.Second)
	dial := func(cn string) *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(g.addr), kgo.DefaultProduceTopic("t"), kgo.RequestRetries(0), kgo.RetryTimeout(time.Second),
			kgo.DialTLSConfig(&tls.Config{RootCAs: ca.Pool, Certificates: []tls.Certificate{ca.Issue(t, cn, x509.ExtKeyUsageClientAuth)}}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	if err := dial("app-billing").ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("produce with a mapped certificate: %v", err)
	}
	rec.mu.Lock()
	seen := append([]string(nil), rec.seen...)
	rec.mu.Unlock()
	if len(seen) == 0 || seen[len(seen)-1] != "svc:app-billing" {
		t.Errorf("filters saw principals %q, want svc:app-billing", seen)
	}
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := dial("someone").Ping(pctx); err == nil {
		t.Error("a certificate no rule maps was served")
	}
}

// TestSASLFrameBound: before authenticating, a client cannot make the
// gateway read a frame over 512 KiB: the connection is closed at its size.
func TestSASLFrameBound(t *testing.T) {
	g, _ := saslGateway(t, &testPlain{users: map[string]string{"bob": "pw"}}, nil)
	c := dialRaw(t, g.addr)
	hdr := requestFrame(kmsg.NewPtrMetadataRequest(), 1, "t")
	big := binary.BigEndian.AppendUint32(nil, uint32(8<<20))
	c.write(append(append(big, hdr[4:]...), make([]byte, 256)...)) // a Metadata request announcing 8 MiB, and its first bytes
	if _, err := c.readFrame(); err == nil {
		t.Fatal("the gateway answered a frame of 8 MiB from an unauthenticated client")
	}
	if n := g.errCount("frame_too_large"); n != 1 {
		t.Errorf("%v frame_too_large errors counted, want 1", n)
	}
}
