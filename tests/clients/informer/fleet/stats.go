package main

import (
	"errors"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"kube-fanout.test/clients/informer/requestkind"
)

// writtenAt is the annotation the load harness's churn stamps on every object it writes: the
// wall-clock time of the write in nanoseconds since the Unix epoch (tests/tools/write_stamp.h).
const writtenAt = "kube-fanout.bench/written-at"

// maxSamples bounds the latency samples kept per informer kind (the first ones are kept).
const maxSamples = 2_000_000

// stats is the whole fleet's tally, shared by every agent.
type stats struct {
	mu        sync.Mutex
	requests  map[string]int            // list, watch, watchlist, get, other
	status    map[string]int            // HTTP status of every answered request
	protocols map[string]int            // HTTP/2.0 or HTTP/1.1, per answered request
	failures  map[string]int            // requests without an answer, by failureKind
	fallbacks map[string]int            // LISTs of a resource: a WatchList that fell back
	watchErrs map[string]int            // reflector ListAndWatch errors, by failureKind
	events    map[string]int            // non-initial handler calls per informer
	latencyMs map[string][]float64      // write -> handler call, per informer
	samples   map[string]map[string]int // up to 5 example failures per kind
	syncMs    []float64                 // agent start -> every informer synced
}

func newStats() *stats {
	return &stats{requests: map[string]int{}, status: map[string]int{}, protocols: map[string]int{},
		failures:  map[string]int{},
		fallbacks: map[string]int{}, watchErrs: map[string]int{}, events: map[string]int{},
		latencyMs: map[string][]float64{}, samples: map[string]map[string]int{}}
}

// failureKind names why a request got no answer: a failed TLS handshake, a connection the
// server closed or reset, a refused connection, a timeout, or something else.
func failureKind(err error) string {
	s := err.Error()
	switch {
	case strings.Contains(s, "handshake") || strings.Contains(s, "tls:") ||
		strings.Contains(s, "x509"):
		return "handshake"
	case errors.Is(err, syscall.ECONNREFUSED) || strings.Contains(s, "connection refused"):
		return "refused"
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		strings.Contains(s, "EOF") || strings.Contains(s, "reset by peer") ||
		strings.Contains(s, "broken pipe") || strings.Contains(s, "GOAWAY"):
		return "eof_reset"
	case strings.Contains(s, "timeout") || strings.Contains(s, "deadline"):
		return "timeout"
	}
	return "other"
}

func (s *stats) sampleLocked(kind, text string) {
	m := s.samples[kind]
	if m == nil {
		m = map[string]int{}
		s.samples[kind] = m
	}
	if _, ok := m[text]; ok || len(m) < 5 {
		m[text]++
	}
}

func (s *stats) request(kind, resource string, resp *http.Response, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests[kind]++
	if kind == "list" {
		s.fallbacks[resource]++
	}
	if err != nil {
		k := failureKind(err)
		s.failures[k]++
		s.sampleLocked(k, err.Error())
		return
	}
	s.status[strconv.Itoa(resp.StatusCode)]++
	s.protocols[resp.Proto]++
}

func (s *stats) watchError(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := failureKind(err)
	s.watchErrs[k]++
	s.sampleLocked("watch_"+k, err.Error())
}

func (s *stats) event(informer string, annotations map[string]string, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events[informer]++
	ns, err := strconv.ParseInt(annotations[writtenAt], 10, 64)
	if err != nil || len(s.latencyMs[informer]) >= maxSamples {
		return
	}
	s.latencyMs[informer] = append(s.latencyMs[informer], float64(now.UnixNano()-ns)/1e6)
}

func (s *stats) synced(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.syncMs = append(s.syncMs, float64(d.Microseconds())/1e3)
}

// quantiles summarises samples as {n, p50, p90, p99, max} (nearest rank).
func quantiles(v []float64) map[string]any {
	out := map[string]any{"n": len(v)}
	if len(v) == 0 {
		return out
	}
	v = append([]float64(nil), v...)
	sort.Float64s(v)
	at := func(q float64) float64 {
		i := int(q*float64(len(v))+0.5) - 1
		if i < 0 {
			i = 0
		}
		if i >= len(v) {
			i = len(v) - 1
		}
		return v[i]
	}
	out["p50"], out["p90"], out["p99"], out["max"] = at(0.5), at(0.9), at(0.99), v[len(v)-1]
	return out
}

func (s *stats) result() map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	latency := map[string]any{}
	for k, v := range s.latencyMs {
		latency[k] = quantiles(v)
	}
	failed := 0
	for _, n := range s.failures {
		failed += n
	}
	return map[string]any{
		"synced": len(s.syncMs), "sync_ms": quantiles(s.syncMs),
		"requests": s.requests, "status": s.status, "protocols": s.protocols, "failed_requests": failed,
		"failures": s.failures, "status_429": s.status["429"], "list_fallbacks": s.fallbacks,
		"watch_errors": s.watchErrs, "failure_samples": s.samples, "events": s.events,
		"latency_ms": latency,
	}
}

// counting is the RoundTripper every agent's client-go transport is wrapped in.
type counting struct {
	next http.RoundTripper
	s    *stats
}

func (t *counting) RoundTrip(req *http.Request) (*http.Response, error) {
	kind, resource := requestkind.Classify(req.URL, req.Method)
	resp, err := t.next.RoundTrip(req)
	t.s.request(kind, resource, resp, err)
	return resp, err
}
