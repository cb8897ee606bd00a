package filter

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// A refused partition is answered at once when nothing is left of the
// request, kept for the broker's answer otherwise, and dropped with
// acks=0; either way it lands under its own topic's entry.
func TestAnswerProduce(t *testing.T) {
	refused := []Refused{{Topic: "a", TopicID: [16]byte{1}, Partition: 3, Code: 87, Message: "no"}}
	for _, tc := range []struct {
		name        string
		left        bool // a topic is still to be sent
		acks        int16
		answered    bool
		pendingWant int64
	}{
		{"nothing left", false, -1, true, 0},
		{"some left", true, -1, false, 1},
		{"acks=0", true, 0, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var pending PerRequest[Refused]
			c := &Context{}
			r := kmsg.NewPtrProduceRequest()
			r.Version, r.Acks = 9, tc.acks
			if tc.left {
				r.Topics = append(r.Topics, kmsg.ProduceRequestTopic{Topic: "b"})
			}
			req := &Request{Header: Header{CorrelationID: 5}, Body: r}
			AnswerProduce(c, req, r, refused, &pending)
			if got := req.Response() != nil; got != tc.answered {
				t.Fatalf("answered = %v, want %v", got, tc.answered)
			}
			if pending.Len() != tc.pendingWant {
				t.Fatalf("pending = %d, want %d", pending.Len(), tc.pendingWant)
			}
			if !tc.left {
				return
			}
			// The broker's answer, with the refused partition added.
			resp := kmsg.NewPtrProduceResponse()
			resp.Version = 9
			resp.Topics = []kmsg.ProduceResponseTopic{{Topic: "a"}, {Topic: "b"}}
			AddProduceRefused(resp, pending.Take(c, 5))
			if tc.pendingWant == 0 {
				if len(resp.Topics[0].Partitions) != 0 {
					t.Fatal("a dropped partition was added")
				}
				return
			}
			p := resp.Topics[0].Partitions
			if len(resp.Topics) != 2 || len(p) != 1 || p[0].Partition != 3 || p[0].ErrorCode != 87 || p[0].BaseOffset != -1 || *p[0].ErrorMessage != "no" {
				t.Fatalf("response %+v", resp.Topics)
			}
		})
	}
}

// From v13 a refused partition goes under its topic by ID.
func TestAddProduceRefusedByID(t *testing.T) {
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = 13
	resp.Topics = []kmsg.ProduceResponseTopic{{TopicID: [16]byte{2}}}
	AddProduceRefused(resp, []Refused{{TopicID: [16]byte{2}, Partition: 1}, {TopicID: [16]byte{3}, Partition: 2}})
	if len(resp.Topics) != 2 || len(resp.Topics[0].Partitions) != 1 || resp.Topics[1].TopicID != [16]byte{3} {
		t.Fatalf("response %+v", resp.Topics)
	}
}
