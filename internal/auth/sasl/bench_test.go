package sasl_test

import (
	"testing"
	"time"
)

// BenchmarkSCRAMServer is the gateway's share of one SCRAM authentication: both rounds, with the client's
// PBKDF2 done once beforehand (a client pays it on every connection; docs/security.md). It reports the
// server's time alone as server-ns/op; ns/op includes the client's HMACs.
func BenchmarkSCRAMServer(b *testing.B) {
	store := newStore(b, "alice", "alice-pw")
	for _, m := range scramMechs {
		b.Run(m.name, func(b *testing.B) {
			mech := m.new(store)
			client := mustClient(b, m.client, "alice", "alice-pw")
			run := func() time.Duration {
				conv := client.NewConversation()
				c1, _ := conv.Step("")
				start := time.Now()
				ex := mech.Start(b.Context(), "127.0.0.1:1")
				s1, _, err := ex.Next([]byte(c1))
				spent := time.Since(start)
				if err != nil {
					b.Fatal(err)
				}
				c2, _ := conv.Step(string(s1))
				start = time.Now()
				_, done, err := ex.Next([]byte(c2))
				spent += time.Since(start)
				if err != nil || !done {
					b.Fatalf("client-final: %v, done %v", err, done)
				}
				return spent
			}
			run() // derive the client's keys
			var server time.Duration
			b.ReportAllocs()
			for b.Loop() {
				server += run()
			}
			b.ReportMetric(float64(server.Nanoseconds())/float64(b.N), "server-ns/op")
		})
	}
}
