// Test-rig only: builds the etcd server from the Go module proxy.
module kube-fanout.test/rig/etcd

go 1.24.0

require go.etcd.io/etcd/server/v3 v3.6.8
