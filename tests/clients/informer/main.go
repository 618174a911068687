// Command informer runs the shared informers a node agent runs, against one server, for a
// bounded time, and prints every event handler call as one JSON line on stdout:
//
//   - pods bound to the node (kubelet: fieldSelector=spec.nodeName=<node>),
//   - the node's own Node (kubelet, kube-proxy: fieldSelector=metadata.name=<node>),
//   - EndpointSlices as kube-proxy selects them
//     (labelSelector=!service.kubernetes.io/headless,!service.kubernetes.io/service-proxy-name),
//   - with --metadata=RESOURCE, a metadata-only informer of that core/v1 resource (in --namespace),
//     as the garbage collector and quota run them (k8s.io/client-go/metadata: Accept
//     ...;as=PartialObjectMetadataList / PartialObjectMetadata, protobuf first); its events are
//     named "metadata-RESOURCE".
//
// The integration tests (tests/integration/test_clients.py) run it against the apiserver and
// against kube-fanout at the same time and compare the two outputs.
//
// Output lines, in order:
//
//	{"config":{...}}                                   flags and the effective WatchListClient gate
//	{"informer":"pods|node|endpointslices","op":"add|update|delete","key":"ns/name","rv":"...",
//	 "initial":true}                                   one per handler call ("initial": adds from
//	                                                   the initial list only)
//	{"synced":true,"initial_sync":{"pods":"watchlist|list",...}}
//	                                                   once every handler has seen its initial state
//	{"requests":{"list":N,"watch":N,"watchlist":N,...},"log":[...]}
//	                                                   at the end: the requests the informers sent
//
// With --decode-cost it runs no informer: it measures what decoding watch events costs a
// client-go agent in JSON and in protobuf (decode.go).
//
// WatchList: client-go v0.36.3 enables its WatchListClient feature by default (beta, default on
// since 1.35; k8s.io/client-go/features/known_features.go) and, unless a program replaces
// client-go's feature gates, reads every gate once from the environment variable
// KUBE_FEATURE_<name> (features/envvar.go, strconv.ParseBool values). So
// KUBE_FEATURE_WatchListClient=false makes each Reflector do LIST (resourceVersion=0) then
// WATCH, and =true (or unset) makes it open one WATCH with sendInitialEvents=true,
// resourceVersionMatch=NotOlderThan and allowWatchBookmarks=true instead of the LIST, falling back
// to LIST if that fails (tools/cache/reflector.go: ListAndWatchWithContext, watchList). This
// program does not touch the gates, so the environment decides.
//
// Content type: like kubelet and kube-proxy (whose default --kube-api-content-type is protobuf),
// the typed clients of client-go v0.36 ask for "application/vnd.kubernetes.protobuf,
// application/json" for built-in types.
//
// Exit status: 0 at the end (after --duration seconds, or earlier on SIGTERM or SIGINT) if every
// informer synced, 2 if one did not, 1 on a usage or setup error.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"kube-fanout.test/clients/informer/requestkind"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	clientfeatures "k8s.io/client-go/features"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// out serialises JSON lines from the informers' handler goroutines onto stdout.
type out struct {
	mu  sync.Mutex
	enc *json.Encoder
}

func (o *out) line(v any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.enc.Encode(v); err != nil {
		fmt.Fprintf(os.Stderr, "informer: writing stdout: %v\n", err)
		os.Exit(1)
	}
}

type event struct {
	Informer string `json:"informer"`
	Op       string `json:"op"`
	Key      string `json:"key"`
	RV       string `json:"rv"`
	Initial  bool   `json:"initial,omitempty"`
}

// request is one request the informers sent, as the RoundTripper saw it.
type request struct {
	Kind     string `json:"kind"` // list, watch, watchlist, get, other
	Resource string `json:"resource"`
	URI      string `json:"uri"`
	Status   int    `json:"status"`          // 0: no response
	Proto    string `json:"proto,omitempty"` // HTTP/1.1 or HTTP/2.0, as the response came
	Error    string `json:"error,omitempty"`
}

// recorder keeps every request the informers sent, as a RoundTripper wrapper saw it.
type recorder struct {
	mu  sync.Mutex
	log []request
}

// recording is the RoundTripper client-go's transport is wrapped in.
type recording struct {
	next http.RoundTripper
	rec  *recorder
}

func (t *recording) RoundTrip(req *http.Request) (*http.Response, error) {
	kind, resource := requestkind.Classify(req.URL, req.Method)
	rec := request{Kind: kind, Resource: resource, URI: req.URL.RequestURI()}
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		rec.Error = err.Error()
	} else {
		rec.Status = resp.StatusCode
		rec.Proto = resp.Proto
	}
	t.rec.mu.Lock()
	t.rec.log = append(t.rec.log, rec)
	t.rec.mu.Unlock()
	return resp, err
}

func (r *recorder) snapshot() []request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]request(nil), r.log...)
}

// initialSync says, per resource, how the initial state arrived: "list" if a LIST was sent,
// else "watchlist" if a WatchList stream was opened.
func initialSync(log []request) map[string]string {
	how := map[string]string{}
	for _, r := range log {
		switch {
		case r.Kind == "list":
			how[r.Resource] = "list"
		case r.Kind == "watchlist" && how[r.Resource] == "":
			how[r.Resource] = "watchlist"
		}
	}
	return how
}

// nextProtos: nil lets client-go offer h2 and http/1.1 (it uses HTTP/2 when the server agrees).
func nextProtos(http1 bool) []string {
	if http1 {
		return []string{"http/1.1"}
	}
	return nil
}

func main() {
	server := flag.String("server", "", "apiserver (or kube-fanout) URL, https://host:port")
	caFile := flag.String("ca-file", "", "CA bundle that signs the server's certificate")
	token := flag.String("token", "", "bearer token")
	node := flag.String("node", "", "node name: pods bound to it, its Node object")
	duration := flag.Float64("duration", 10, "seconds to run before exiting")
	namespace := flag.String("namespace", "", "limit pods and EndpointSlices to this namespace (default: all, as kubelet and kube-proxy do)")
	userAgent := flag.String("user-agent", "kf-informer", "User-Agent header (to find this run's requests in a proxy log)")
	http1 := flag.Bool("http1.1", false, "offer only http/1.1 by ALPN (client-go negotiates HTTP/2 over TLS by default)")
	metadataResource := flag.String("metadata", "", "also run a metadata-only informer of this core/v1 resource (e.g. configmaps)")
	decodeCost := flag.Bool("decode-cost", false, "measure what decoding watch events costs, JSON vs protobuf (decode.go), instead of running informers")
	decodeResources := flag.String("decode-resources", "pods,nodes,endpointslices", "--decode-cost: the resources whose watch streams are measured")
	decodeRuns := flag.Int("decode-runs", 5, "--decode-cost: runs per resource and encoding (the median is reported)")
	decodeMinCPU := flag.Duration("decode-min-cpu", 300*time.Millisecond, "--decode-cost: CPU time each run spends decoding at least")
	klog.InitFlags(nil) // -v for client-go's own logging, on stderr
	flag.Parse()
	if *decodeCost && *server != "" && *decodeRuns > 0 {
		cfg := &rest.Config{Host: *server, BearerToken: *token, UserAgent: *userAgent,
			TLSClientConfig: rest.TLSClientConfig{CAFile: *caFile, NextProtos: nextProtos(*http1)}}
		os.Exit(runDecodeCost(cfg, strings.Split(*decodeResources, ","), *namespace, *decodeRuns, *decodeMinCPU))
	}
	if *server == "" || *node == "" || *duration <= 0 {
		fmt.Fprintln(os.Stderr, "usage: informer --server=URL --node=NAME [--ca-file=PATH] [--token=T] [--duration=S] [--namespace=NS]")
		os.Exit(1)
	}

	enc := json.NewEncoder(os.Stdout)
	enc.SetEscapeHTML(false) // URIs keep their '&'
	stdout := &out{enc: enc}
	stdout.line(map[string]any{"config": map[string]any{
		"server": *server, "node": *node, "namespace": *namespace, "duration": *duration,
		"watchListClient": clientfeatures.FeatureGates().Enabled(clientfeatures.WatchListClient),
	}})

	rec := &recorder{}
	cfg := &rest.Config{
		Host:            *server,
		BearerToken:     *token,
		TLSClientConfig: rest.TLSClientConfig{CAFile: *caFile, NextProtos: nextProtos(*http1)},
		UserAgent:       *userAgent,
		WrapTransport: func(rt http.RoundTripper) http.RoundTripper {
			return &recording{next: rt, rec: rec}
		},
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "informer: %v\n", err)
		os.Exit(1)
	}

	// SIGTERM or SIGINT end the run early, the same way as the end of --duration.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, time.Duration(*duration*float64(time.Second)))
	defer cancel()

	// One factory per agent-style selection, each as its agent builds it. Resync 0: handler
	// calls come only from the server's events, so two runs can be compared call by call.
	nsOpt := informers.WithNamespace(*namespace) // "" is all namespaces
	pods := informers.NewSharedInformerFactoryWithOptions(client, 0, nsOpt,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			// pkg/kubelet/config/apiserver.go
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", *node).String()
		}))
	nodes := informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			// pkg/kubelet/kubelet.go (nodeLister), cmd/kube-proxy
			o.FieldSelector = fields.OneTermEqualSelector(metav1.ObjectNameField, *node).String()
		}))
	noProxyName, err := labels.NewRequirement("service.kubernetes.io/service-proxy-name", selection.DoesNotExist, nil)
	if err != nil {
		panic(err)
	}
	noHeadless, err := labels.NewRequirement("service.kubernetes.io/headless", selection.DoesNotExist, nil)
	if err != nil {
		panic(err)
	}
	proxySelector := labels.NewSelector().Add(*noProxyName, *noHeadless)
	slices := informers.NewSharedInformerFactoryWithOptions(client, 0, nsOpt,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			// cmd/kube-proxy/app/server.go
			o.LabelSelector = proxySelector.String()
		}))

	var synced []cache.InformerSynced
	watch := func(name string, inf cache.SharedIndexInformer) {
		emit := func(op string, obj any, initial bool) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				e := event{Informer: name, Op: op, Key: t.Key}
				if m, err := meta.Accessor(t.Obj); err == nil {
					e.RV = m.GetResourceVersion()
				}
				stdout.line(e)
				return
			}
			key, _ := cache.MetaNamespaceKeyFunc(obj)
			e := event{Informer: name, Op: op, Key: key, Initial: initial}
			if m, err := meta.Accessor(obj); err == nil {
				e.RV = m.GetResourceVersion()
			}
			stdout.line(e)
		}
		reg, err := inf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
			AddFunc:    func(obj any, initial bool) { emit("add", obj, initial) },
			UpdateFunc: func(_, obj any) { emit("update", obj, false) },
			DeleteFunc: func(obj any) { emit("delete", obj, false) },
		})
		if err != nil {
			fmt.Fprintf(os.Stderr, "informer: %v\n", err)
			os.Exit(1)
		}
		synced = append(synced, reg.HasSynced)
	}
	watch("pods", pods.Core().V1().Pods().Informer())
	watch("node", nodes.Core().V1().Nodes().Informer())
	watch("endpointslices", slices.Discovery().V1().EndpointSlices().Informer())

	for _, f := range []informers.SharedInformerFactory{pods, nodes, slices} {
		f.Start(ctx.Done())
	}
	var metadataFactory metadatainformer.SharedInformerFactory
	if *metadataResource != "" {
		metadataClient, err := metadata.NewForConfig(cfg)
		if err != nil {
			fmt.Fprintf(os.Stderr, "informer: %v\n", err)
			os.Exit(1)
		}
		metadataFactory = metadatainformer.NewFilteredSharedInformerFactory(metadataClient, 0, *namespace, nil)
		gvr := schema.GroupVersionResource{Version: "v1", Resource: *metadataResource}
		watch("metadata-"+*metadataResource, metadataFactory.ForResource(gvr).Informer())
		metadataFactory.Start(ctx.Done())
	}
	status := 0
	// Handler registrations are synced once their informer has synced and every event of the
	// initial state has been delivered to the handler.
	if cache.WaitForCacheSync(ctx.Done(), synced...) {
		stdout.line(map[string]any{"synced": true, "initial_sync": initialSync(rec.snapshot())})
	} else {
		fmt.Fprintln(os.Stderr, "informer: not synced before --duration ran out")
		status = 2
	}
	<-ctx.Done()
	for _, f := range []informers.SharedInformerFactory{pods, nodes, slices} {
		f.Shutdown()
	}
	if metadataFactory != nil {
		metadataFactory.Shutdown()
	}

	log := rec.snapshot()
	counts := map[string]int{}
	for _, r := range log {
		counts[r.Kind]++
	}
	stdout.line(map[string]any{"requests": counts, "log": log})
	os.Exit(status)
}
