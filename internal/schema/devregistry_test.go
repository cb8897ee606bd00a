package schema

import (
	"context"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/straitgw/strait/bench/schemas"
	"github.com/straitgw/strait/internal/bench/kafkaload"
	"github.com/straitgw/strait/internal/devregistry"
)

// TestAgainstDevRegistry runs the client side against strait registry, as
// `strait demo` and the validation example pair them: schemas registered
// with franz-go's client, records validated through this package.
func TestAgainstDevRegistry(t *testing.T) {
	srv, err := devregistry.Start(devregistry.Options{Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	ctx := context.Background()
	cl, err := sr.NewClient(sr.URLs(srv.URL()))
	if err != nil {
		t.Fatal(err)
	}
	register := func(subject string, s sr.Schema) int {
		t.Helper()
		ss, err := cl.CreateSchema(ctx, subject, s)
		if err != nil {
			t.Fatalf("registering %s: %v", subject, err)
		}
		return ss.ID
	}
	avroID := register("orders-value", sr.Schema{Schema: schemas.Avro})
	protoID := register("orders-pb-value", sr.Schema{Schema: schemas.Proto, Type: sr.TypeProtobuf})
	jsonID := register("orders-json-value", sr.Schema{Schema: schemas.JSONSchema, Type: sr.TypeJSON})
	register("money", sr.Schema{Schema: `{"type":"record","name":"Money","namespace":"common","fields":[{"name":"cents","type":"long"}]}`})
	billID := register("bill-value", sr.Schema{
		Schema:     `{"type":"record","name":"Bill","fields":[{"name":"total","type":"common.Money"}]}`,
		References: []sr.SchemaReference{{Name: "common.Money", Subject: "money", Version: 1}},
	})

	r := NewRegistry(newREST(t, RegistryConfig{URL: srv.URL()}), Options{})
	for _, tc := range []struct {
		topic string
		id    int
		idx   []int
		body  []byte
	}{
		{"orders", avroID, nil, encoded(t, kafkaload.PayloadAvro)},
		{"orders-pb", protoID, []int{0}, encoded(t, kafkaload.PayloadProtobuf)},
		{"orders-json", jsonID, nil, encoded(t, kafkaload.PayloadJSON)},
		{"bill", billID, nil, []byte{0x54}},
	} {
		if _, err := r.Validate(ctx, tc.topic, false, wireRecord(tc.id, tc.idx, tc.body), &Rule{}); err != nil {
			t.Errorf("%s: %v", tc.topic, err)
		}
	}
	if _, err := r.Validate(ctx, "orders", false, wireRecord(jsonID, nil, encoded(t, kafkaload.PayloadJSON)), &Rule{}); !errors.Is(err, ErrNotAllowed) {
		t.Errorf("id of another subject: %v, want ErrNotAllowed", err)
	}
	if _, err := r.SchemaByID(ctx, 999); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown id: %v, want ErrNotFound", err)
	}
	if _, err := r.SchemaByVersion(ctx, "nope", Latest); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown subject: %v, want ErrNotFound", err)
	}
}
