// Test client only: runs kubelet's and kube-proxy's informers against a server (see main.go),
// fleet/: many client-go agents in one process, and handshakes/: full TLS handshakes one after
// the other as client-go makes them (tests/bench/run-handshake-bench). Built as a dependency of
// the rig module tests/cluster/gomod/kubernetes (which requires and replaces this one), in its
// `go build` with the Kubernetes commands and etcd: tests/clients/build-informer. Not a module to
// build alone.
//
// The requirements stay at or below the rig's build list so they change nothing in it: the
// staging modules at v0.0.0 (the rig, like k8s.io/kubernetes, replaces them with v0.36.3).
module kube-fanout.test/clients/informer

go 1.26.0

require (
	k8s.io/api v0.0.0
	k8s.io/apimachinery v0.0.0
	k8s.io/client-go v0.0.0
	k8s.io/klog/v2 v2.140.0
)
