package testkit

import (
	"bytes"
	"errors"
	"io"
	"net"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// ProcessCPU is the user and system CPU time this process has used.
func ProcessCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// H2CRequest is the POST BenchH2CPipeline sends.
type H2CRequest struct {
	Authority, Path, Authorization string
	Body                           []byte
}

// headerBlock encodes req's header fields never indexed, so that the
// same bytes serve every request on a connection.
func (req H2CRequest) headerBlock() []byte {
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range []hpack.HeaderField{{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"},
		{Name: ":path", Value: req.Path}, {Name: ":authority", Value: req.Authority},
		{Name: "content-type", Value: "application/json"}, {Name: "authorization", Value: req.Authorization},
		{Name: "content-length", Value: strconv.Itoa(len(req.Body))}} {
		f.Sensitive = true
		enc.WriteField(f)
	}
	return hb.Bytes()
}

// H2CHold opens copies of a request on one HTTP/2 connection with prior
// knowledge and leaves them open, for measuring what a server holds per
// request in flight: frames are written by hand and nothing is kept per
// request, and the answers are read and dropped.
type H2CHold struct {
	nc    net.Conn
	fr    *http2.Framer
	block []byte
	body  []byte
	next  uint32
}

// DialH2CHold connects to addr, with windows large enough for every
// answer; the connection closes with Close, or with the test.
func DialH2CHold(tb testing.TB, addr string, req H2CRequest) *H2CHold {
	tb.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { nc.Close() })
	h := &H2CHold{nc: nc, fr: http2.NewFramer(nc, nc), block: req.headerBlock(), body: req.Body, next: 1}
	io.WriteString(nc, http2.ClientPreface)
	h.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20})
	h.fr.WriteWindowUpdate(0, 1<<30)
	go io.Copy(io.Discard, nc)
	return h
}

// Close closes the connection.
func (h *H2CHold) Close() { h.nc.Close() }

// Open sends k more requests, each a HEADERS and a DATA frame.
func (h *H2CHold) Open(k int) {
	for range k {
		h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: h.next, BlockFragment: h.block, EndHeaders: true})
		h.fr.WriteData(h.next, true, h.body)
		h.next += 2
	}
}

// MemInUse is the heap and the goroutine stack memory in use after two
// collections (the second empties the sync.Pools, whose contents belong
// to no request).
func MemInUse() (heap, stack uint64) {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc, ms.StackInuse
}

// h2cDepth is how many requests BenchH2CPipeline keeps in flight.
const h2cDepth = 64

// BenchH2CPipeline sends b.N copies of req over one HTTP/2 connection with
// prior knowledge to addr, h2cDepth in flight, as cheaply as a client can:
// frames written by hand, a header block encoded once (never indexed, so
// the same bytes every time), as many requests per write as have credit.
// It reads answers to their END_STREAM, fails on a reset or GOAWAY, and
// reports the whole process's CPU per request as cpu-µs/op.
func BenchH2CPipeline(b *testing.B, addr string, req H2CRequest) {
	b.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	block := req.headerBlock()
	var out bytes.Buffer
	wfr := http2.NewFramer(&out, nil)
	out.WriteString(http2.ClientPreface)
	wfr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1<<31 - 1})
	wfr.WriteWindowUpdate(0, 1<<31-1-65535)
	if _, err := nc.Write(out.Bytes()); err != nil {
		b.Fatal(err)
	}
	credits := make(chan struct{}, h2cDepth)
	for range h2cDepth {
		credits <- struct{}{}
	}
	done := make(chan error, 1)
	go func() {
		rfr := http2.NewFramer(nil, nc)
		rfr.SetMaxReadFrameSize(1 << 20)
		for ended := 0; ended < b.N; {
			f, err := rfr.ReadFrame()
			if err != nil {
				done <- err
				return
			}
			switch f := f.(type) {
			case *http2.SettingsFrame:
				if !f.IsAck() {
					nc.Write([]byte{0, 0, 0, 4, 1, 0, 0, 0, 0}) // SETTINGS ACK
				}
			case *http2.GoAwayFrame, *http2.RSTStreamFrame:
				done <- errors.New("the server reset a request")
				return
			}
			if f.Header().StreamID != 0 && f.Header().Flags.Has(http2.FlagDataEndStream) {
				ended++
				credits <- struct{}{}
			}
		}
		done <- nil
	}()
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := ProcessCPU()
	id := uint32(1)
	for sent := 0; sent < b.N; {
		<-credits
		k := 1
		for ; k < h2cDepth && len(credits) > 0; k++ {
			<-credits
		}
		k = min(k, b.N-sent)
		out.Reset()
		for range k {
			wfr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block, EndHeaders: true})
			wfr.WriteData(id, true, req.Body)
			id += 2
		}
		sent += k
		if _, err := nc.Write(out.Bytes()); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(float64(ProcessCPU()-cpu0)/float64(b.N)/1e3, "cpu-µs/op")
}
