package filter

import (
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/straitgw/strait/internal/kafka/wire"
)

// rec records calls in a shared log.
type rec struct {
	name     string
	in       Interest
	log      *[]string
	respond  bool
	panicMsg string
}

func (r *rec) Name() string       { return r.name }
func (r *rec) Interest() Interest { return r.in }
func (r *rec) OnRequest(_ *Context, req *Request) error {
	*r.log = append(*r.log, "req:"+r.name)
	if r.panicMsg != "" {
		panic(r.panicMsg)
	}
	if r.respond {
		req.Respond(&kmsg.MetadataResponse{})
	}
	return nil
}
func (r *rec) OnResponse(_ *Context, _ *Response) error {
	*r.log = append(*r.log, "resp:"+r.name)
	return nil
}

func TestChainMasksAndOrder(t *testing.T) {
	var log []string
	both := Interest{Requests: Keys(wire.KeyMetadata), Responses: Keys(wire.KeyMetadata)}
	a := &rec{name: "a", in: both, log: &log}
	b := &rec{name: "b", in: Interest{Responses: []KeyRange{{Key: wire.KeyMetadata, MinVersion: 9}}}, log: &log}
	c := &rec{name: "c", in: both, log: &log, respond: true}
	d := &rec{name: "d", in: both, log: &log}
	ch, err := NewChain(a, b, c, d)
	if err != nil {
		t.Fatal(err)
	}
	if m := ch.RequestMask(wire.KeyMetadata, 12); m != 0b1101 {
		t.Errorf("request mask = %04b, want 1101", m)
	}
	if m := ch.ResponseMask(wire.KeyMetadata, 8); m != 0b1101 {
		t.Errorf("v8 response mask = %04b, want 1101 (b starts at v9)", m)
	}
	if m := ch.ResponseMask(wire.KeyMetadata, 12); m != 0b1111 {
		t.Errorf("v12 response mask = %04b, want 1111", m)
	}
	if m := ch.RequestMask(wire.KeyProduce, 9); m != 0 {
		t.Errorf("nobody wants Produce, mask = %04b", m)
	}
	// Versions newer than Strait reads share the last slot.
	if m := ch.RequestMask(wire.KeyMetadata, 999); m != 0b1101 {
		t.Errorf("newer-version mask = %04b, want 1101", m)
	}

	req := &Request{Body: kmsg.NewPtrMetadataRequest()}
	at, err := ch.OnRequest(&Context{}, ch.RequestMask(wire.KeyMetadata, 12), req)
	if err != nil || at != 2 || req.Response() == nil {
		t.Fatalf("OnRequest = %d, %v, response %v; want c (2) to answer", at, err, req.Response())
	}
	if err := ch.OnResponse(&Context{}, ch.ResponseMask(wire.KeyMetadata, 12), at, &Response{Body: req.Response()}); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(log, " ")
	if want := "req:a req:c resp:b resp:a"; got != want {
		t.Errorf("calls = %q, want %q (d never sees the request; only filters before c see its answer, in reverse)", got, want)
	}
}

func TestChainRecoversPanics(t *testing.T) {
	var log []string
	p := &rec{name: "p", in: Interest{Requests: Keys(wire.KeyMetadata)}, log: &log, panicMsg: "boom"}
	ch, err := NewChain(p)
	if err != nil {
		t.Fatal(err)
	}
	_, err = ch.OnRequest(&Context{}, ch.RequestMask(wire.KeyMetadata, 12), &Request{Body: kmsg.NewPtrMetadataRequest()})
	var pe *PanicError
	if !errors.As(err, &pe) || pe.Value != "boom" || len(pe.Stack) == 0 {
		t.Fatalf("err = %v, want a PanicError carrying the value and a stack", err)
	}
}

func TestChainRejectsInterestWithoutHandler(t *testing.T) {
	var log []string
	// A filter subscribing to responses must implement OnResponse.
	f := struct {
		Filter
	}{&rec{name: "x", in: Interest{Responses: Keys(wire.KeyMetadata)}, log: &log}}
	if _, err := NewChain(f); err == nil {
		t.Fatal("NewChain accepted a filter that subscribes to responses without OnResponse")
	}
}

func TestContextValues(t *testing.T) {
	c := &Context{}
	type key struct{}
	if c.Value(key{}) != nil || c.Principal() != "" {
		t.Fatal("fresh context holds values")
	}
	c.SetValue(key{}, 7)
	c.SetPrincipal("User:alice")
	if c.Value(key{}) != 7 || c.Principal() != "User:alice" {
		t.Fatalf("got %v, %q", c.Value(key{}), c.Principal())
	}
}
