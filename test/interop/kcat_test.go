package interop

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
)

// kcatCodecs are the -z values tried; librdkafka takes zstd too although
// kcat's help lists only three.
var kcatCodecs = []string{"none", "gzip", "snappy", "lz4", "zstd"}

// TestKcat produces keyed records with kcat (librdkafka) per codec, then
// reads them back twice: as a consumer group member (-G) and as a plain
// consumer from the beginning (-o beginning -e).
func TestKcat(t *testing.T) {
	needKcat(t)
	t.Parallel()
	e := startEnv(t)
	for _, codec := range kcatCodecs {
		t.Run(codec, func(t *testing.T) {
			kcatRoundTrip(t, e, codec, 300)
		})
	}
	// acks=0 produce requests get no response: the gateway must not wait
	// for one, nor lose the requests pipelined behind them.
	t.Run("lz4-acks0", func(t *testing.T) {
		kcatRoundTrip(t, e, "lz4", 300, "-X", "acks=0")
	})
}

// kcatSecurity returns the kcat options to reach e.
func kcatSecurity(e *env) []string {
	if e.caFile == "" {
		return nil
	}
	return []string{"-X", "security.protocol=ssl", "-X", "ssl.ca.location=" + e.caFile}
}

// kcatRoundTrip produces n records with kcat and codec, then consumes them
// back both ways. produceArgs are extra producer options.
func kcatRoundTrip(t *testing.T, e *env, codec string, n int, produceArgs ...string) {
	t.Helper()
	topic := topicName(t, "t")
	recs := makeRecords(recordSpec{prefix: topic, n: n, text: true})
	// kcat's -H headers go on every record it produces.
	fixed := []header{{Key: "src", Value: []byte("kcat")}, {Key: "codec", Value: []byte(codec)}}
	var in bytes.Buffer
	for i := range recs {
		recs[i].Headers = fixed
		fmt.Fprintf(&in, "%s:%s\n", recs[i].Key, recs[i].Value)
	}
	sec := kcatSecurity(e)
	args := append([]string{"-P", "-b", e.addr, "-t", topic, "-K", ":", "-z", codec,
		"-H", "src=kcat", "-H", "codec=" + codec,
		"-X", "acks=all", "-X", "linger.ms=5", "-X", "client.id=strait-interop-kcat"}, sec...)
	args = append(args, produceArgs...)
	runClient(t, in.Bytes(), "kcat", args...)
	checkStored(t, e, topic, recs, checkOpts{headers: true, partitions: numPartitions}, codec)

	t.Run("group", func(t *testing.T) {
		args := append([]string{"-C", "-b", e.addr, "-G", topic + "-g", "-J", "-q", "-e", "-c", strconv.Itoa(n),
			"-X", "auto.offset.reset=earliest", "-X", "client.id=strait-interop-kcat"}, sec...)
		args = append(args, topic)
		out := runClient(t, nil, "kcat", args...)
		verify(t, recs, parseKcatJSON(t, out), checkOpts{headers: true, partitions: numPartitions})
	})
	t.Run("simple", func(t *testing.T) {
		args := append([]string{"-C", "-b", e.addr, "-t", topic, "-o", "beginning", "-e", "-J", "-q",
			"-X", "client.id=strait-interop-kcat"}, sec...)
		out := runClient(t, nil, "kcat", args...)
		verify(t, recs, parseKcatJSON(t, out), checkOpts{headers: true, partitions: numPartitions})
	})
}

// kcatMessage is one line of kcat -J output.
type kcatMessage struct {
	Partition int32    `json:"partition"`
	Offset    int64    `json:"offset"`
	Headers   []string `json:"headers"` // name, value, name, value...
	Key       *string  `json:"key"`
	Payload   *string  `json:"payload"`
}

func parseKcatJSON(t *testing.T, out []byte) []record {
	t.Helper()
	var recs []record
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var m kcatMessage
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("kcat printed a line that is not a JSON message (%v): %s", err, short(line))
		}
		r := record{Partition: m.Partition, Offset: m.Offset}
		if m.Key != nil {
			r.Key = []byte(*m.Key)
		}
		if m.Payload != nil {
			r.Value = []byte(*m.Payload)
		}
		for i := 0; i+1 < len(m.Headers); i += 2 {
			r.Headers = append(r.Headers, header{Key: m.Headers[i], Value: []byte(m.Headers[i+1])})
		}
		recs = append(recs, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return recs
}

// TestKcatEncryption round-trips records with kcat through a gateway that
// encrypts every topic: the broker holds ciphertext (keys in clear,
// headers hidden), and kcat reads back exactly what it wrote, per codec.
func TestKcatEncryption(t *testing.T) {
	needKcat(t)
	t.Parallel()
	e := startEnv(t, withEncryption())
	for _, codec := range kcatCodecs {
		t.Run(codec, func(t *testing.T) {
			kcatRoundTrip(t, e, codec, 200)
		})
	}
}
