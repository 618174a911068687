// AgentPool: the simulated clients of the load test, many thousands of them in one process.
//
//   kubelet i     LIST+WATCH its pods (spec.nodeName=node-i), its Node (metadata.name=node-i)
//                 and K configmaps lcm-0..lcm-K-1 of the scenario namespace, one by name each;
//   kube-proxy    LIST+WATCH all EndpointSlices and all Services (kube-proxy's label selectors);
//   poller        every interval (random phase) GET one random pod of the namespace, then LIST
//                 the namespace's pods, on one keep-alive connection (Fluentd/Datadog-style);
//   reference     LIST+WATCH every pod, Node and EndpointSlice (kf_load --reference-watch runs
//                 one straight at the apiserver: the apiserver's own delivery to one watcher).
//
// Each LIST+WATCH is a reflector as in client-go: a LIST at resourceVersion=0, a WATCH with
// bookmarks and a random 5-10 minute timeout from the list's resourceVersion, a re-watch from the
// last resourceVersion seen when a watch ends, a relist (counted) after a 410, and a jittered,
// bounded backoff after errors. Every watch has its own HTTP/1.1 connection (TLS when the target
// is https), which its LIST used before it; or, with `http2`, every stream of an agent is one
// HTTP/2 stream on the agent's one connection (H2Link, nghttp2's client session).
//
// Threads: `threads` io_contexts, one thread each; an agent's connections all live on one of
// them and are touched only there (coroutines, no thread per agent, no locks on the data path).
// Nothing keeps a body: LIST bodies are scanned for their resourceVersion as they arrive, watch
// events are split out of the chunked stream and looked at in place. Every connection, plain or
// TLS (OpenSSL on the bare socket), reads into one buffer per thread when it has data, so an idle
// watch holds no read buffer. With node certificates (AgentOptions), each kubelet presents its
// own client certificate on every connection instead of the shared token.
//
// StartAgent and Progress may be called from any thread; Streams and GetResults after Stop.
#ifndef KUBE_FANOUT_TESTS_LOAD_AGENTS_H_
#define KUBE_FANOUT_TESTS_LOAD_AGENTS_H_

#include <array>
#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "tests/load/completeness.h"
#include "tests/load/node_certs.h"
#include "tests/tools/api_client.h"
#include "tests/tools/latency_histogram.h"

namespace kf::load {

class ReadinessProbe;

namespace asio = boost::asio;

enum class AgentType { kKubelet, kKubeProxy, kPoller, kReference };

struct AgentOptions {
  std::string namespace_ = "kf-load";
  int configmaps_per_kubelet = 2;
  int pods = 0;  // load-pod-0..pods-1, for the pollers' GETs.
  double poll_interval_s = 5;
  // > 0: a poller LISTs the pods of one node (node-0..node-N-1, fieldSelector spec.nodeName), as
  // a node agent's check does; 0: the whole namespace's pods.
  int poller_list_nodes = 0;
  int threads = 2;
  // Connections spread over the source addresses 127.0.0.1..N (loopback targets only), since one
  // source address reaches a server port from about 28,000 ephemeral ports at most.
  int source_ips = 1;
  uint32_t seed = 1;
  // Write stamps older than this are not latencies of this run (wall clock, ns).
  int64_t measure_from_unix_ns = 0;
  // Non-empty: kubelets authenticate as their nodes, each with a client certificate of its own
  // (system:node:node-i, group system:nodes) signed by this CA at its start, and no token.
  std::string node_ca_cert_file, node_ca_key_file;
  // Ask for protobuf as client-go's typed clients do (kubelet's and kube-proxy's default):
  // lists and watch frames are then read in protobuf.
  bool protobuf = false;
  // Each kubelet and kube-proxy multiplexes all its requests (LISTs, GETs, WATCHes) as streams
  // on one HTTP/2 connection, as client-go's transport does (ALPN h2 over TLS, prior knowledge
  // in plain HTTP); pollers keep HTTP/1.1.
  bool http2 = false;
  // More replicas of the target: the same host and scheme on these ports.
  std::vector<std::string> more_ports;
  // Non-null: each replica's readiness (one per address, target first); new connections go only
  // to ready ones while any is. Outlives the pool.
  const ReadinessProbe* readiness = nullptr;
};

// Cumulative counters, summed over the threads; readable while the agents run.
struct AgentProgress {
  uint64_t agents = 0, streams = 0;
  uint64_t open_connections = 0, peak_connections = 0, failed_connections = 0;
  uint64_t open_watches = 0, pending_first_lists = 0;
  uint64_t events = 0, bookmarks = 0, relists = 0;
  uint64_t watch_bytes = 0;  // Read on watch streams, heads and framing included.
  uint64_t requests = 0, errors = 0;
};

enum Verb { kList = 0, kWatch = 1, kGet = 2, kVerbs = 3 };

struct AgentResults {
  std::array<tools::LatencyHistogram, kKinds> latency;  // Write stamp to receipt, per resource.
  tools::LatencyHistogram list_latency, get_latency;    // Request sent to response complete.
  std::array<uint64_t, kVerbs> by_verb{};
  std::map<int, uint64_t> by_status;
  uint64_t errors = 0;      // Requests that got no (complete) response.
  uint64_t timeouts = 0;    // Connections closed for overrunning their deadline.
  uint64_t watch_ends = 0;  // Watches that ended before the stop (timeout, error, 410).
};

class AgentPool {
 public:
  AgentPool(tools::Endpoint target, std::string token, AgentOptions options);
  ~AgentPool();
  AgentPool(const AgentPool&) = delete;
  AgentPool& operator=(const AgentPool&) = delete;

  // Resolves the target, prepares TLS and starts the threads.
  absl::Status Start();
  // Starts agent `index` of `type` (kubelet i watches node-i's objects).
  void StartAgent(AgentType type, int index);
  AgentProgress Progress() const;
  // Closes every connection (RST, so no TIME_WAIT is left behind) and waits for the threads,
  // stopping them after `limit`.
  void Stop(std::chrono::seconds limit);

  // After Stop, valid until the pool is destroyed.
  std::vector<const StreamRecord*> Streams() const;
  AgentResults GetResults() const;
  // Failures by kind (numbers in the message blanked out, so node-12 and node-7 are one kind),
  // most frequent first, as "COUNTx example".
  std::vector<std::string> FailureSamples() const;

 private:
  class Task;
  class H2Link;
  struct H2Stream;
  class Reflector;
  class Poller;
  struct Conn;
  struct Shard;
  friend class Task;
  friend class H2Link;
  friend class Reflector;
  friend class Poller;

  void NoteFailure(const std::string& message);
  void Sweep(Shard& shard);

  const tools::Endpoint target_;
  const std::string token_;
  const AgentOptions options_;
  std::string request_headers_;      // Host, Accept, Authorization: the same on every request.
  std::string certificate_headers_;  // The same without Authorization: certificate users'.
  std::string accept_;               // The Accept header's value.
  std::unique_ptr<NodeCertificates> node_certs_;  // Kubelets' identities, when configured.
  // The target's address, and the other replicas' (same host and scheme, options_.more_ports):
  // each new connection goes to the next one in turn (the next ready one, with
  // options_.readiness), as a Service spreads connections over its endpoints; a refused one is
  // retried on the next.
  std::vector<asio::ip::tcp::endpoint> addresses_;
  const asio::ip::tcp::endpoint& NextAddress();
  std::atomic<uint64_t> next_address_{0};
  std::optional<asio::ssl::context> ssl_;
  std::vector<std::unique_ptr<Shard>> shards_;
  std::atomic<uint64_t> agents_{0}, streams_{0};
  std::atomic<uint64_t> open_connections_{0}, peak_connections_{0}, failed_connections_{0};
  std::atomic<uint64_t> open_watches_{0}, pending_first_lists_{0};
  std::atomic<uint64_t> next_source_{0};
  mutable std::mutex failures_mu_;
  struct FailureKind {
    uint64_t count = 0;
    std::string example;
  };
  std::map<std::string, FailureKind> failures_;
  uint64_t other_failures_ = 0;  // Of kinds past the first kMaxFailureKinds.
};

}  // namespace kf::load

#endif  // KUBE_FANOUT_TESTS_LOAD_AGENTS_H_
