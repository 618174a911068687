// Command fleet runs N client-go node agents in one process against one server, each as a
// kubelet and kube-proxy connect: its own transport and TLS connection (its own client
// certificate, issued here from the cluster's client CA), HTTP/2, protobuf, and client-go's
// default WatchListClient gate (on in v0.36), with seven informers:
//
//   - its pods (fieldSelector spec.nodeName=NODE), its Node (metadata.name=NODE),
//   - Services, EndpointSlices (kube-proxy's label selector), one ConfigMap (--configmap, one
//     that pods bound to the node reference, so the Node authorizer allows it),
//   - CSIDrivers and RuntimeClasses.
//
// Agents start evenly over --ramp seconds; the run ends --duration seconds after the first
// started (or on SIGTERM/SIGINT). Agent i is node NODE-PREFIX(i mod --nodes). Its certificate
// is CN=system:node:NODE, O=system:nodes (Node authorizer) plus O=--proxier-group, which
// --admin-token binds to the ClusterRole system:node-proxier (kube-proxy's role) at the
// --apiserver, so the EndpointSlices informer is allowed.
//
// The result (stdout, or --out) is one JSON object: agents started and synced, time to sync
// (p50/p90/p99/max ms), requests by kind and HTTP status, requests that got no answer by kind
// (handshake, eof_reset, refused, timeout, other) with samples, 429s, LISTs by resource (with
// WatchList on, each is a WatchList that fell back to LIST), reflector watch errors, events per
// informer after the initial state, and write->handler latency per informer from the
// harness's write stamp annotation. Exit status 0 if every agent synced, 2 if not, 1 on a
// setup error.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientfeatures "k8s.io/client-go/features"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
)

type options struct {
	server, apiserver, caFile, clientCACert, clientCAKey, adminToken string
	nodePrefix, namespace, configMap, proxierGroup, out              string
	agents, nodes                                                    int
	ramp, duration                                                   float64
}

func parseFlags() options {
	var o options
	flag.StringVar(&o.server, "server", "", "the agents' server (apiserver or kube-fanout), https://host:port")
	flag.StringVar(&o.apiserver, "apiserver", "", "the apiserver, for --admin-token's setup (default --server)")
	flag.StringVar(&o.caFile, "ca-file", "", "CA bundle that signs the servers' certificates")
	flag.StringVar(&o.clientCACert, "client-ca-cert", "", "client CA certificate that signs the agents' certificates")
	flag.StringVar(&o.clientCAKey, "client-ca-key", "", "its private key")
	flag.StringVar(&o.adminToken, "admin-token", "", "token allowed to create the ClusterRoleBinding of --proxier-group (none: not created)")
	flag.StringVar(&o.proxierGroup, "proxier-group", "kf-fleet:node-proxiers", "extra group in every agent's certificate, bound to system:node-proxier")
	flag.StringVar(&o.nodePrefix, "node-prefix", "node-", "node names: PREFIX0 .. PREFIX(nodes-1)")
	flag.StringVar(&o.namespace, "namespace", "kf-load", "namespace of --configmap")
	flag.StringVar(&o.configMap, "configmap", "", "the ConfigMap each agent watches by name (none: six informers)")
	flag.StringVar(&o.out, "out", "", "write the result JSON here (default stdout)")
	flag.IntVar(&o.agents, "agents", 10, "agents")
	flag.IntVar(&o.nodes, "nodes", 0, "nodes the agents are spread over (default --agents)")
	flag.Float64Var(&o.ramp, "ramp", 10, "seconds over which the agents start")
	flag.Float64Var(&o.duration, "duration", 60, "seconds from the first agent's start to the end of the run")
	klog.InitFlags(nil)
	flag.Parse()
	if o.nodes <= 0 {
		o.nodes = o.agents
	}
	if o.apiserver == "" {
		o.apiserver = o.server
	}
	if o.server == "" || o.clientCACert == "" || o.clientCAKey == "" || o.agents <= 0 ||
		o.duration <= 0 || o.ramp < 0 {
		fmt.Fprintln(os.Stderr, "usage: fleet --server=URL --ca-file=CA --client-ca-cert=CRT --client-ca-key=KEY [--agents=N] [--ramp=S] [--duration=S] ...")
		os.Exit(1)
	}
	return o
}

// bindProxiers lets --proxier-group read what kube-proxy reads (EndpointSlices, Services).
func bindProxiers(o options, ca []byte) error {
	if o.adminToken == "" {
		return nil
	}
	c, err := kubernetes.NewForConfig(&rest.Config{Host: o.apiserver, BearerToken: o.adminToken,
		TLSClientConfig: rest.TLSClientConfig{CAData: ca}})
	if err != nil {
		return err
	}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "kf-fleet-node-proxier"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "system:node-proxier"},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "Group", Name: o.proxierGroup}},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = c.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

func main() {
	o := parseFlags()
	ca := readFile(o.caFile)
	is, err := newIssuer(o.clientCACert, o.clientCAKey)
	if err == nil {
		err = bindProxiers(o, ca)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "fleet: %v\n", err)
		os.Exit(1)
	}
	st := newStats()
	agents := make([]*agent, o.agents)
	for i := range agents {
		node := fmt.Sprintf("%s%d", o.nodePrefix, i%o.nodes)
		crt, key, err := is.issue("system:node:"+node, []string{"system:nodes", o.proxierGroup})
		if err != nil {
			fmt.Fprintf(os.Stderr, "fleet: issuing a certificate: %v\n", err)
			os.Exit(1)
		}
		agents[i] = &agent{node: node, cfg: agentConfig(o.server, ca, crt, key, i, st), st: st}
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	start := time.Now()
	ctx, cancel := context.WithDeadline(ctx, start.Add(time.Duration(o.duration*float64(time.Second))))
	defer cancel()
	fmt.Fprintf(os.Stderr, "fleet: %d agents against %s over %gs, WatchListClient=%v\n", o.agents,
		o.server, o.ramp, clientfeatures.FeatureGates().Enabled(clientfeatures.WatchListClient))
	var wg sync.WaitGroup
	started := 0
	for i, a := range agents {
		at := start.Add(time.Duration(float64(i) / float64(o.agents) * o.ramp * float64(time.Second)))
		select {
		case <-ctx.Done():
		case <-time.After(time.Until(at)):
			started++
			wg.Add(1)
			go func() { defer wg.Done(); a.run(ctx, o.namespace, o.configMap) }()
		}
		if ctx.Err() != nil {
			break
		}
	}
	go progress(ctx, st, o.agents)
	<-ctx.Done()
	wg.Wait()

	res := st.result()
	res["agents"], res["started"], res["watches_per_agent"] = o.agents, started, watchesPerAgent(o.configMap)
	res["server"], res["ramp_s"], res["wall_s"] = o.server, o.ramp, time.Since(start).Seconds()
	res["started_unix"] = float64(start.UnixNano()) / 1e9
	res["watch_list_client"] = clientfeatures.FeatureGates().Enabled(clientfeatures.WatchListClient)
	b, _ := json.MarshalIndent(res, "", " ")
	if o.out == "" {
		os.Stdout.Write(append(b, '\n'))
	} else if err := os.WriteFile(o.out, append(b, '\n'), 0o644); err != nil {
		fmt.Fprintf(os.Stderr, "fleet: %v\n", err)
		os.Exit(1)
	}
	if res["synced"].(int) < o.agents {
		os.Exit(2)
	}
}

// progress prints a line on stderr every 5 s until the run ends.
func progress(ctx context.Context, st *stats, agents int) {
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			st.mu.Lock()
			fmt.Fprintf(os.Stderr, "fleet: %d/%d synced, failures %v, 429s %d, LISTs %d\n",
				len(st.syncMs), agents, st.failures, st.status["429"], st.requests["list"])
			st.mu.Unlock()
		}
	}
}
