package sasl_test

import (
	"testing"

	"github.com/xdg-go/scram"
)

// mustClient is an xdg-go SCRAM client, standing in for a Kafka client.
func mustClient(t testing.TB, h scram.HashGeneratorFcn, user, password string) *scram.Client {
	t.Helper()
	c, err := h.NewClient(user, password, "")
	if err != nil {
		t.Fatal(err)
	}
	return c
}
