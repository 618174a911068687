// WatchClient: the benchmark's watchers. Holds N watch connections to kube-fanout over plain
// HTTP/1.1 on one or a few threads (one io_context each, no locks on the hot path), reads them
// reactor-style into one buffer per thread, parses chunked newline-delimited events without
// JSON parsing, and records for each event carrying the write-time annotation the delay from
// that write to its receipt here.
//
// Half the watchers are kubelet-like (the pods of one node) and half kube-proxy-like (every
// EndpointSlice); see WatchPlan.
//
// With Options::tls the watchers speak TLS, as agents reach kube-fanout in a cluster: over
// HTTP/1.1 OpenSSL runs on the same raw sockets (the handshake and the request driven by the
// shard's epoll set, then SSL_read per readable socket); over HTTP/2 each connection's handshake
// (ALPN h2) is done blocking when it connects, and its frames go through SSL_write/SSL_read.
//
// Thread contract: Open, CloseAll, MeasureFrom and Totals may be called from any thread; each
// connection is touched only by its shard's thread. Latencies and PerWatch only after Join.
#ifndef KUBE_FANOUT_TESTS_BENCH_WATCH_CLIENT_H_
#define KUBE_FANOUT_TESTS_BENCH_WATCH_CLIENT_H_

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tests/tools/latency_histogram.h"

struct ssl_ctx_st;
struct ssl_st;

namespace kf::bench {

namespace asio = boost::asio;

// What each watcher asks for: half of them (rounded up) the pods of one node, the j-th of those
// node-(j % nodes), the others every EndpointSlice. The order in which they connect is either
// alternating (pods, slices, pods, ...) or a seeded shuffle.
struct WatchPlan {
  std::vector<int> node;  // Per watcher: its node, or -1 for all EndpointSlices.

  static WatchPlan Make(int watchers, int nodes, bool shuffled, uint32_t seed);
  bool pods(size_t i) const { return node[i] >= 0; }
  size_t size() const { return node.size(); }
};

class WatchClient {
 public:
  struct Options {
    asio::ip::tcp::endpoint proxy;
    std::string token;
    WatchPlan plan;
    int threads = 1;
    bool protobuf = false;  // Accept protobuf (with JSON after it, as client-go asks).
    // 0: HTTP/1.1, a connection per watcher. N > 0: HTTP/2 with prior knowledge (h2c), N
    // consecutive watchers' streams on one connection, as client-go multiplexes an agent's
    // watches.
    int streams_per_connection = 0;
    // > 1: connections spread over the source addresses 127.0.0.1..N (a loopback proxy only),
    // since one source address reaches a port from about 28,000 ephemeral ports.
    int source_ips = 1;
    // TLS (HTTP/1.1, or HTTP/2 by ALPN), the server verified against `ca_file` (for its IP).
    bool tls = false;
    std::string ca_file;
  };

  // Counters, summed over threads. "measured" events carry a write time at or after
  // MeasureFrom(); "initial" ones carry none (the state sent when a watch starts).
  struct Totals {
    uint64_t opened = 0, connected = 0, failed = 0, ended = 0;
    uint64_t connections = 0;  // TCP connections made.
    uint64_t bytes = 0, initial = 0, stale_stamps = 0, bookmarks = 0, errors = 0;
    uint64_t measured_pods = 0, measured_slices = 0;
    uint64_t added = 0, modified = 0, deleted = 0;
    uint64_t measured() const { return measured_pods + measured_slices; }
  };
  struct PerWatch {
    bool connected = false;
    bool open = false;
    uint64_t measured = 0;
  };

  explicit WatchClient(Options options);
  ~WatchClient();
  WatchClient(const WatchClient&) = delete;
  WatchClient& operator=(const WatchClient&) = delete;

  // Empty, or why the client cannot run (the TLS context could not be set up).
  const std::string& setup_error() const { return setup_error_; }
  void Start();
  void Open(int index);
  void MeasureFrom(int64_t unix_ns) { measure_from_.store(unix_ns, std::memory_order_relaxed); }
  // Resets every connection (RST, so no TIME_WAIT is left behind) and lets the threads finish.
  void CloseAll();
  // Waits for the threads to finish, stopping them after `limit`.
  void Join(std::chrono::seconds limit);

  Totals GetTotals() const;
  // All measured events, or only those of the pods (or EndpointSlice) watchers.
  tools::LatencyHistogram Latencies() const;
  tools::LatencyHistogram Latencies(bool pods) const;
  std::vector<PerWatch> PerWatchResults(int n) const;
  std::vector<std::string> FailureSamples() const;

 private:
  struct Watch;
  struct Shard;

 public:
  struct Conn;  // An HTTP/2 connection (named by nghttp2's callbacks).

 private:
  // HTTP/2: a watcher's stream on its connection (made by the first of its watchers).
  void OpenStream(Shard& shard, Watch& watch);
  void ConnectH2(Shard& shard, Conn& conn);
  void SubmitStream(Shard& shard, Conn& conn, Watch& watch);
  void SendH2(Shard& shard, Conn& conn);
  void WaitH2(Shard& shard, Conn& conn);
  // TLS (ALPN h2) on a connected socket; false if it failed (the connection has ended).
  bool HandshakeH2(Shard& shard, Conn& conn);
  // One SSL_read into shard.buffer: its size, or 0 and would_block, eof or a reset in `ec`.
  static size_t ReadTls(ssl_st* ssl, Shard& shard, boost::system::error_code& ec);
  void EndConn(Shard& shard, Conn& conn, const std::string& reason);

 public:  // For nghttp2's callbacks (watch_client.cc).
  int OnH2Status(Conn& conn, int32_t stream_id, std::string_view status);
  int OnH2Data(Conn& conn, int32_t stream_id, std::string_view data);
  int OnH2Close(Conn& conn, int32_t stream_id, uint32_t error_code);

 private:
  void Connect(Shard& shard, Watch& watch);
  // A watch's request is written: its socket joins the shard's set of sockets to read.
  void DoWait(Shard& shard, Watch& watch);
  void WaitForReady(Shard& shard);
  void OnReady(Shard& shard);
  void OnReadable(Shard& shard, Watch& watch);
  // The socket out of asio (into fd); false if that failed (the watch has ended).
  bool Release(Shard& shard, Watch& watch);
  // TLS: the handshake, then the request, as far as the socket lets them go now.
  void StartTls(Shard& shard, Watch& watch);
  void AdvanceTls(Shard& shard, Watch& watch);
  // Parses the `n` bytes just read into shard.buffer; false if the watch ended.
  bool Consume(Shard& shard, Watch& watch, size_t n);
  // The watch's socket in the shard's set, waiting for `events` (EPOLLIN or EPOLLOUT).
  bool WaitFor(Shard& shard, Watch& watch, uint32_t events);
  static void CloseWatchSocket(Shard& shard, Watch& watch, bool reset);
  void OnEvent(Shard& shard, Watch& watch, std::string_view line, int64_t now);
  void End(Shard& shard, Watch& watch, const std::string& reason);
  void NoteFailure(const std::string& message);

  const Options options_;
  const std::string pod_path_prefix_;
  const std::string slice_path_;
  std::atomic<int64_t> measure_from_;
  std::vector<std::unique_ptr<Shard>> shards_;
  ssl_ctx_st* tls_ctx_ = nullptr;  // SSL_CTX, with Options::tls.
  std::string setup_error_;
  mutable std::mutex failures_mu_;
  std::vector<std::string> failures_;  // The first few, for the report.
  size_t failure_count_ = 0;
};

}  // namespace kf::bench

#endif  // KUBE_FANOUT_TESTS_BENCH_WATCH_CLIENT_H_
