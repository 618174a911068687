// The --decode-cost mode: what decoding a watch stream costs a client-go agent, per event and
// per encoding.
//
// For each resource it opens one watch at resourceVersion=0 (the server's current objects as
// ADDED events: real watch frames, as an agent's informer receives them) once asking for JSON and
// once for protobuf as client-go's typed clients do, and keeps the bytes. Then it decodes them
// the way client-go's rest client decodes a watch (rest/request.go newStreamWatcher: the
// negotiated stream decoder, framer and object decoder of the typed clientset's scheme, behind
// rest/watch.Decoder), again and again until it has spent --decode-min-cpu of CPU time, and
// divides the process's CPU time (getrusage: user + system, the garbage collector's threads
// included) by the events decoded. Median of --decode-runs runs. What an informer does after
// the decode (its DeltaFIFO, the indexer, the handlers) is the same for both encodings and is
// not counted.
//
// One JSON line per resource and encoding on stdout:
//
//	{"decode":{"resource":"pods","encoding":"protobuf","events":N,"bytes":B,"bytes_per_event":F,
//	 "cpu_ns_per_event":F,"runs_cpu_ns_per_event":[...],"allocs_per_event":F}}
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	restclientwatch "k8s.io/client-go/rest/watch"
)

const (
	jsonAccept     = "application/json"
	protobufAccept = "application/vnd.kubernetes.protobuf,application/json" // client-go's typed clients
	maxStreamBytes = 512 << 20
)

type decodeTarget struct {
	path       string
	gv         schema.GroupVersion
	namespaced bool
}

var decodeTargets = map[string]decodeTarget{
	"pods":           {"/api/v1/pods", schema.GroupVersion{Version: "v1"}, true},
	"nodes":          {"/api/v1/nodes", schema.GroupVersion{Version: "v1"}, false},
	"configmaps":     {"/api/v1/configmaps", schema.GroupVersion{Version: "v1"}, true},
	"services":       {"/api/v1/services", schema.GroupVersion{Version: "v1"}, true},
	"endpointslices": {"/apis/discovery.k8s.io/v1/endpointslices", schema.GroupVersion{Group: "discovery.k8s.io", Version: "v1"}, true},
}

type decodeResult struct {
	Resource       string    `json:"resource"`
	Encoding       string    `json:"encoding"`
	Events         int       `json:"events"`
	Bytes          int       `json:"bytes"`
	BytesPerEvent  float64   `json:"bytes_per_event"`
	CPUNsPerEvent  float64   `json:"cpu_ns_per_event"`
	RunsCPUNs      []float64 `json:"runs_cpu_ns_per_event"`
	AllocsPerEvent float64   `json:"allocs_per_event"`
}

// captureWatch reads one watch stream at resourceVersion=0 to its end (timeoutSeconds), and
// returns its bytes and Content-Type. `namespace` applies to namespaced resources.
func captureWatch(client *http.Client, server string, target decodeTarget, namespace, accept string, timeoutS int) ([]byte, string, error) {
	path := target.path
	if !target.namespaced {
		namespace = ""
	}
	if namespace != "" && strings.HasPrefix(path, "/api/v1/") {
		path = "/api/v1/namespaces/" + namespace + "/" + strings.TrimPrefix(path, "/api/v1/")
	} else if namespace != "" {
		i := strings.LastIndex(path, "/")
		path = path[:i] + "/namespaces/" + namespace + path[i:]
	}
	url := fmt.Sprintf("%s%s?watch=true&resourceVersion=0&timeoutSeconds=%d", strings.TrimRight(server, "/"), path, timeoutS)
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(timeoutS+30)*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, "", err
	}
	req.Header.Set("Accept", accept)
	resp, err := client.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return nil, "", fmt.Errorf("GET %s: HTTP %d: %s", url, resp.StatusCode, body)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxStreamBytes+1))
	if err != nil {
		return nil, "", fmt.Errorf("GET %s: %v", url, err)
	}
	if len(data) > maxStreamBytes {
		return nil, "", fmt.Errorf("GET %s: stream over %d bytes", url, maxStreamBytes)
	}
	return data, resp.Header.Get("Content-Type"), nil
}

// decodeAll decodes one captured stream as client-go's rest client does; returns the events.
func decodeAll(data []byte, contentType string, gv schema.GroupVersion) (int, error) {
	mediaType, params, err := mime.ParseMediaType(contentType)
	if err != nil {
		return 0, fmt.Errorf("content type %q: %v", contentType, err)
	}
	negotiator := k8sruntime.NewClientNegotiator(scheme.Codecs.WithoutConversion(), gv)
	objectDecoder, streamingSerializer, framer, err := negotiator.StreamDecoder(mediaType, params)
	if err != nil {
		return 0, err
	}
	frames := framer.NewFrameReader(io.NopCloser(bytes.NewReader(data)))
	dec := restclientwatch.NewDecoder(streaming.NewDecoder(frames, streamingSerializer), objectDecoder)
	defer dec.Close()
	n := 0
	for {
		_, obj, err := dec.Decode()
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		if obj == nil {
			return n, fmt.Errorf("event %d decoded to no object", n)
		}
		n++
	}
}

func cpuNow() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func measureDecode(resource, encoding string, data []byte, contentType string, gv schema.GroupVersion, runs int, minCPU time.Duration) (decodeResult, error) {
	events, err := decodeAll(data, contentType, gv)
	if err != nil {
		return decodeResult{}, err
	}
	if events == 0 {
		return decodeResult{}, fmt.Errorf("%s (%s): the watch at resourceVersion=0 carried no event; nothing to measure", resource, encoding)
	}
	r := decodeResult{Resource: resource, Encoding: encoding, Events: events, Bytes: len(data),
		BytesPerEvent: float64(len(data)) / float64(events)}
	var allocs, decoded uint64
	for i := 0; i < runs; i++ {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		start := cpuNow()
		n := 0
		for cpuNow()-start < minCPU || n == 0 {
			m, err := decodeAll(data, contentType, gv)
			if err != nil {
				return decodeResult{}, err
			}
			n += m
		}
		spent := cpuNow() - start
		runtime.ReadMemStats(&after)
		allocs += after.Mallocs - before.Mallocs
		decoded += uint64(n)
		r.RunsCPUNs = append(r.RunsCPUNs, float64(spent.Nanoseconds())/float64(n))
	}
	sorted := append([]float64(nil), r.RunsCPUNs...)
	sort.Float64s(sorted)
	r.CPUNsPerEvent = sorted[len(sorted)/2]
	r.AllocsPerEvent = float64(allocs) / float64(decoded)
	return r, nil
}

func runDecodeCost(cfg *rest.Config, resources []string, namespace string, runs int, minCPU time.Duration) int {
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "informer: %v\n", err)
		return 1
	}
	enc := json.NewEncoder(os.Stdout)
	for _, resource := range resources {
		target, ok := decodeTargets[resource]
		if !ok {
			fmt.Fprintf(os.Stderr, "informer: --decode-resources: unknown resource %q\n", resource)
			return 1
		}
		for _, e := range []struct{ name, accept string }{{"json", jsonAccept}, {"protobuf", protobufAccept}} {
			data, contentType, err := captureWatch(client, cfg.Host, target, namespace, e.accept, 1)
			if err != nil {
				fmt.Fprintf(os.Stderr, "informer: %s: %v\n", resource, err)
				return 1
			}
			wantProto := e.name == "protobuf"
			if strings.Contains(contentType, "protobuf") != wantProto {
				fmt.Fprintf(os.Stderr, "informer: %s: asked for %s, got Content-Type %q\n", resource, e.name, contentType)
				return 1
			}
			r, err := measureDecode(resource, e.name, data, contentType, target.gv, runs, minCPU)
			if err != nil {
				fmt.Fprintf(os.Stderr, "informer: %s: %v\n", resource, err)
				return 1
			}
			if err := enc.Encode(map[string]any{"decode": r}); err != nil {
				return 1
			}
		}
	}
	return 0
}
