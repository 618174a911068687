package main

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	corev1informers "k8s.io/client-go/informers/core/v1"
	discoveryinformers "k8s.io/client-go/informers/discovery/v1"
	nodeinformers "k8s.io/client-go/informers/node/v1"
	storageinformers "k8s.io/client-go/informers/storage/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// agent is one node's kubelet and kube-proxy informers on one client-go transport.
type agent struct {
	node string
	cfg  *rest.Config
	st   *stats
}

// agentConfig is the agent's rest.Config: its own certificate makes client-go's transport cache
// give it its own transport and so its own connection; protobuf as kubelet and kube-proxy ask
// (--kube-api-content-type); kubelet's QPS and burst.
func agentConfig(server string, ca, crt, key []byte, i int, st *stats) *rest.Config {
	return &rest.Config{
		Host:            server,
		TLSClientConfig: rest.TLSClientConfig{CAData: ca, CertData: crt, KeyData: key},
		ContentConfig: rest.ContentConfig{
			ContentType:        "application/vnd.kubernetes.protobuf",
			AcceptContentTypes: "application/vnd.kubernetes.protobuf,application/json",
		},
		QPS:       50,
		Burst:     100,
		UserAgent: fmt.Sprintf("kf-fleet/agent-%d", i),
		WrapTransport: func(rt http.RoundTripper) http.RoundTripper {
			return &counting{next: rt, s: st}
		},
	}
}

func watchesPerAgent(configMap string) int {
	if configMap == "" {
		return 6
	}
	return 7
}

// run starts the agent's informers, records the time until all have synced, counts their
// events until ctx ends.
func (a *agent) run(ctx context.Context, namespace, configMap string) {
	began := time.Now()
	client, err := kubernetes.NewForConfig(a.cfg)
	if err != nil {
		a.st.watchError(err)
		return
	}
	byName := func(name string) func(*metav1.ListOptions) {
		return func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector(metav1.ObjectNameField, name).String()
		}
	}
	none := cache.Indexers{}
	infs := map[string]cache.SharedIndexInformer{
		"pods": corev1informers.NewFilteredPodInformer(client, metav1.NamespaceAll, 0, none,
			func(o *metav1.ListOptions) {
				o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", a.node).String()
			}),
		"nodes":    corev1informers.NewFilteredNodeInformer(client, 0, none, byName(a.node)),
		"services": corev1informers.NewFilteredServiceInformer(client, metav1.NamespaceAll, 0, none, nil),
		"endpointslices": discoveryinformers.NewFilteredEndpointSliceInformer(client, metav1.NamespaceAll, 0, none,
			func(o *metav1.ListOptions) { // cmd/kube-proxy/app/server.go
				o.LabelSelector = "!service.kubernetes.io/headless,!service.kubernetes.io/service-proxy-name"
			}),
		"csidrivers":     storageinformers.NewFilteredCSIDriverInformer(client, 0, none, nil),
		"runtimeclasses": nodeinformers.NewFilteredRuntimeClassInformer(client, 0, none, nil),
	}
	if configMap != "" {
		infs["configmaps"] = corev1informers.NewFilteredConfigMapInformer(client, namespace, 0, none, byName(configMap))
	}
	var synced []cache.InformerSynced
	for name, inf := range infs {
		name := name
		_ = inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
			a.st.watchError(err)
		})
		onEvent := func(obj any) {
			now := time.Now()
			if m, err := meta.Accessor(obj); err == nil {
				a.st.event(name, m.GetAnnotations(), now)
			}
		}
		reg, err := inf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
			AddFunc: func(obj any, initial bool) {
				if !initial {
					onEvent(obj)
				}
			},
			UpdateFunc: func(_, obj any) { onEvent(obj) },
			DeleteFunc: func(obj any) { onEvent(obj) },
		})
		if err != nil {
			a.st.watchError(err)
			return
		}
		synced = append(synced, reg.HasSynced)
		go inf.RunWithContext(ctx)
	}
	if cache.WaitForCacheSync(ctx.Done(), synced...) {
		a.st.synced(time.Since(began))
	}
	<-ctx.Done()
}
