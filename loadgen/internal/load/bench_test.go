package load

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"
)

// BenchmarkClientStream is the load generator's own cost of one 10k-event
// stream (the static server's included): the loadgen must stay far below
// the gateway it drives (see the gateway's BenchmarkStream).
func BenchmarkClientStream(b *testing.B) {
	var body bytes.Buffer
	for i := range 10000 {
		fmt.Fprintf(&body, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"delta\":{\"content\":\" tok%s\"}}]}\n\n", strings.Repeat("x", i%8))
	}
	body.WriteString("data: [DONE]\n\n")
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(body.Bytes())
	}))
	defer s.Close()
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	defer client.CloseIdleConnections()
	b.ReportAllocs()
	cpu0 := cpuTime()
	for b.Loop() {
		if r := Once(context.Background(), client, s.URL, "k", 10000); r.Outcome != OutcomeOK || r.Events != 10000 {
			b.Fatalf("%+v", r)
		}
	}
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N)/1e6, "cpu-ms/op")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
