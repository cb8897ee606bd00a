package proxy

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	kafkasasl "github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/straitgw/strait/internal/auth/credstore"
	"github.com/straitgw/strait/internal/auth/sasl"
)

// BenchmarkAuthenticate measures a client connection's setup through a
// gateway that terminates SASL, per mechanism, against the real store at
// its default iteration count: dial, SaslHandshake v1, the
// SaslAuthenticate rounds (the client's PBKDF2 for SCRAM included, as a
// client pays it; the gateway's side is the stored keys' check), and
// close. The first round trip of each connection also dials the broker;
// "none" is the same connection without SASL (dial, ApiVersions, close).
func BenchmarkAuthenticate(b *testing.B) {
	store := filepath.Join(b.TempDir(), "users.store")
	if _, err := credstore.AddUser(store, "bench", "bench-secret", credstore.DefaultIterations); err != nil {
		b.Fatal(err)
	}
	st, err := credstore.Open(store, credstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	mechs := []sasl.Mechanism{sasl.NewPlain(st), sasl.NewSCRAMSHA256(st), sasl.NewSCRAMSHA512(st)}
	g := startGateway(b, func(o *Options) { o.SASL = &SASL{Mechanisms: mechs} })
	plainGW := startGatewayTo(b, g.broker.ListenAddrs(), nil)
	b.Run("none", func(b *testing.B) {
		for b.Loop() {
			if err := apiVersionsOnce(plainGW.addr); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, c := range []struct {
		name string
		m    kafkasasl.Mechanism
	}{
		{"PLAIN", plain.Auth{User: "bench", Pass: "bench-secret"}.AsMechanism()},
		{"SCRAM-SHA-256", scram.Auth{User: "bench", Pass: "bench-secret"}.AsSha256Mechanism()},
		{"SCRAM-SHA-512", scram.Auth{User: "bench", Pass: "bench-secret"}.AsSha512Mechanism()},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if err := authenticateOnce(g.addr, c.m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// apiVersionsOnce opens a connection, asks ApiVersions, and closes it: the
// setup of a connection that does not authenticate, for comparison.
func apiVersionsOnce(addr string) error {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write(requestFrame(kmsg.NewPtrApiVersionsRequest(), 1, "bench")); err != nil {
		return err
	}
	var sz [4]byte
	if _, err := io.ReadFull(conn, sz[:]); err != nil {
		return err
	}
	_, err = io.CopyN(io.Discard, conn, int64(binary.BigEndian.Uint32(sz[:])))
	return err
}

// authenticateOnce opens a connection, authenticates with m, and closes it.
func authenticateOnce(addr string, m kafkasasl.Mechanism) error {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	vc := &VirtualCluster{opts: Options{Name: "bench-client", Target: Target{RequestTimeout: 10 * time.Second}}}
	// The gateway's own upstream login speaks the client side of the
	// same exchange: reuse it against the gateway.
	_, err = vc.authenticateUpstream(context.Background(), conn, addr, m)
	return err
}
