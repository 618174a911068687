#include "tests/bench/watch_client.h"

#include <nghttp2/nghttp2.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "tests/tools/event_stream_parser.h"
#include "tests/tools/loopback_source.h"
#include "tests/tools/write_stamp.h"

namespace kf::bench {
namespace {

constexpr size_t kReadBuffer = 256 << 10;
constexpr int kReadsPerWakeup = 8;   // Then yield to the other connections.
constexpr int kReadyPerRound = 256;  // Sockets taken from the shard's epoll set per round.
constexpr size_t kMaxFailureSamples = 8;

// OpenSSL's reason for the thread's last error, or `otherwise`.
std::string TlsErrorText(const char* otherwise) {
  const unsigned long e = ERR_get_error();  // NOLINT(google-runtime-int): OpenSSL's type.
  const char* why = e != 0 ? ERR_reason_error_string(e) : nullptr;
  return why != nullptr ? why : otherwise;
}

std::string QuotedKey(std::string_view key) {
  return absl::StrCat("\"", std::string(key), "\":\"");
}

}  // namespace

WatchPlan WatchPlan::Make(int watchers, int nodes, bool shuffled, uint32_t seed) {
  WatchPlan p;
  for (int i = 0; i < watchers; ++i) {
    // Alternating: even watchers are the pods ones, the j-th of them on node j % nodes.
    p.node.push_back(i % 2 == 0 ? (i / 2) % std::max(1, nodes) : -1);
  }
  if (shuffled) {
    std::mt19937 rng(seed);
    std::shuffle(p.node.begin(), p.node.end(), rng);
  }
  return p;
}

struct WatchClient::Watch {
  Watch(asio::io_context& ioc, int i, int n) : socket(ioc), index(i), node(n), pods(n >= 0) {}
  ~Watch() {
    if (ssl != nullptr) SSL_free(ssl);
    if (fd >= 0) ::close(fd);
  }
  Watch(const Watch&) = delete;
  Watch& operator=(const Watch&) = delete;
  asio::ip::tcp::socket socket;  // HTTP/1.1 only, until its request is written.
  int fd = -1;                   // Then the socket, released from asio into the shard's set.
  SSL* ssl = nullptr;            // TLS over fd.
  enum class Phase : uint8_t { kHandshake, kRequest, kEvents } phase = Phase::kEvents;
  uint32_t waiting_for = 0;  // The events fd waits for in the shard's set (0: not in it).
  Conn* conn = nullptr;      // HTTP/2: its connection, and its stream there.
  int32_t stream_id = 0;
  tools::EventStreamParser parser;
  std::string request;
  int index;
  int node;
  bool pods;
  bool connected = false;  // The 200 and its headers arrived.
  bool open = true;
  uint64_t measured = 0;
};

// An HTTP/2 connection carrying several watchers' streams (nghttp2's client session).
struct WatchClient::Conn {
  explicit Conn(asio::io_context& ioc) : socket(ioc) {}
  ~Conn() {
    if (session != nullptr) nghttp2_session_del(session);
    if (ssl != nullptr) SSL_free(ssl);
  }
  asio::ip::tcp::socket socket;
  SSL* ssl = nullptr;  // TLS over the socket (ALPN h2).
  nghttp2_session* session = nullptr;
  uint64_t number = 0;  // Its key in Shard::conns.
  bool connected = false;
  bool open = true;
  std::vector<Watch*> pending;        // Waiting for the connection.
  std::map<int32_t, Watch*> streams;  // By stream id.
  WatchClient* client = nullptr;
  Shard* shard = nullptr;
};

struct WatchClient::Shard {
  Shard() : ready_set(ioc) {
    const int fd = epoll_create1(EPOLL_CLOEXEC);
    if (fd >= 0) ready_set.assign(fd);
  }
  asio::io_context ioc{1};
  // The HTTP/1.1 watches' sockets once their request is written, level-triggered: asio waits
  // for the set as a whole (one wait per round of ready sockets, not one per socket and event,
  // each of which costs asio an epoll_ctl that polls the socket again).
  asio::posix::stream_descriptor ready_set;
  bool ready_wait = false;  // A wait on ready_set is under way.
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> guard;
  std::thread thread;
  std::atomic<bool> finished{false};
  // Touched only on this shard's thread (and after Join).
  std::map<int, std::unique_ptr<Watch>> watches;
  std::map<int, std::unique_ptr<Conn>> conns;  // HTTP/2, by connection number.
  tools::LatencyHistogram pod_latencies, slice_latencies;
  std::array<char, kReadBuffer> buffer;
  std::string stamp_key;
  // Written by this shard's thread, read by anyone.
  std::atomic<uint64_t> connections{0};
  std::atomic<uint64_t> opened{0}, connected{0}, failed{0}, ended{0}, bytes{0}, initial{0},
      stale_stamps{0}, bookmarks{0}, errors{0}, measured_pods{0}, measured_slices{0}, added{0},
      modified{0}, deleted{0};
};

namespace {
void Bump(std::atomic<uint64_t>& c, uint64_t n = 1) {
  // Single writer: a plain load and store, no locked instruction.
  c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}
}  // namespace

WatchClient::WatchClient(Options options)
    : options_(std::move(options)),
      pod_path_prefix_(
          "/api/v1/pods?watch=1&allowWatchBookmarks=true&resourceVersion=0"
          "&fieldSelector=spec.nodeName%3Dnode-"),
      slice_path_(
          "/apis/discovery.k8s.io/v1/endpointslices?watch=1&allowWatchBookmarks=true"
          "&resourceVersion=0"),
      measure_from_(std::numeric_limits<int64_t>::max()) {
  if (options_.tls) {
    SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
    if (ctx == nullptr ||
        SSL_CTX_load_verify_locations(ctx, options_.ca_file.c_str(), nullptr) != 1) {
      setup_error_ = absl::StrCat("TLS: cannot load the CA file '", options_.ca_file,
                                  "': ", TlsErrorText("unknown error"));
    } else {
      SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
    }
    tls_ctx_ = ctx;
  }
  for (int i = 0; i < std::max(1, options_.threads); ++i) {
    auto shard = std::make_unique<Shard>();
    shard->stamp_key = QuotedKey(tools::kWrittenAtAnnotation);
    shards_.push_back(std::move(shard));
  }
}

WatchClient::~WatchClient() {
  for (auto& s : shards_) {
    s->guard.reset();
    s->ioc.stop();
    if (s->thread.joinable()) s->thread.join();
  }
  shards_.clear();  // Their SSL objects before the context.
  if (tls_ctx_ != nullptr) SSL_CTX_free(tls_ctx_);
}

void WatchClient::Start() {
  for (auto& s : shards_) {
    s->guard.emplace(s->ioc.get_executor());
    Shard* shard = s.get();
    s->thread = std::thread([shard] {
      shard->ioc.run();
      shard->finished = true;
    });
  }
}

void WatchClient::Open(int index) {
  Shard& shard = *shards_[static_cast<size_t>(index) % shards_.size()];
  asio::post(shard.ioc, [this, &shard, index] {
    auto [it, inserted] = shard.watches.emplace(
        index,
        std::make_unique<Watch>(shard.ioc, index, options_.plan.node[static_cast<size_t>(index)]));
    if (!inserted) return;
    it->second->parser.set_protobuf(options_.protobuf);
    Bump(shard.opened);
    if (options_.streams_per_connection > 0) {
      OpenStream(shard, *it->second);
      return;
    }
    Bump(shard.connections);
    Connect(shard, *it->second);
  });
}

void WatchClient::Connect(Shard& shard, Watch& w) {
  const std::string path = w.pods ? absl::StrCat(pod_path_prefix_, w.node) : slice_path_;
  w.request = absl::StrCat(
      "GET ", path, " HTTP/1.1\r\nHost: ", options_.proxy.address().to_string(), ":",
      options_.proxy.port(), "\r\nAccept: ",
      options_.protobuf ? "application/vnd.kubernetes.protobuf,application/json"
                        : "application/json",
      "\r\nUser-Agent: kf-fanout-bench/0.1\r\nAuthorization: Bearer ", options_.token, "\r\n\r\n");
  if (options_.source_ips > 1) {
    boost::system::error_code ec;
    tools::OpenFromLoopbackSource(
        w.socket, static_cast<uint64_t>(w.index) % static_cast<uint64_t>(options_.source_ips), ec);
    if (ec) {
      End(shard, w, "bind source address: " + ec.message());
      return;
    }
  }
  w.socket.async_connect(options_.proxy, [this, &shard, &w](boost::system::error_code ec) {
    if (ec) {
      if (ec != asio::error::operation_aborted) End(shard, w, "connect: " + ec.message());
      return;
    }
    w.socket.non_blocking(true, ec);
    if (options_.tls) {
      StartTls(shard, w);
      return;
    }
    asio::async_write(w.socket, asio::buffer(w.request),
                      [this, &shard, &w](boost::system::error_code wec, size_t) {
                        if (wec) {
                          if (wec != asio::error::operation_aborted) {
                            End(shard, w, "send request: " + wec.message());
                          }
                          return;
                        }
                        DoWait(shard, w);
                      });
  });
}

bool WatchClient::Release(Shard& shard, Watch& w) {
  boost::system::error_code ec;
  w.fd = w.socket.release(ec);
  if (ec || w.fd < 0) {
    End(shard, w, "release: " + ec.message());
    return false;
  }
  return true;
}

void WatchClient::DoWait(Shard& shard, Watch& w) {
  // Out of asio's reactor into the shard's set (asio would keep reporting it otherwise).
  if (Release(shard, w)) WaitFor(shard, w, EPOLLIN);
}

bool WatchClient::WaitFor(Shard& shard, Watch& w, uint32_t events) {
  if (w.waiting_for == events) return true;
  epoll_event ev{};
  ev.events = events;
  ev.data.ptr = &w;
  const int op = w.waiting_for == 0 ? EPOLL_CTL_ADD : EPOLL_CTL_MOD;
  if (epoll_ctl(shard.ready_set.native_handle(), op, w.fd, &ev) != 0) {
    End(shard, w, "epoll_ctl: " + std::string(strerror(errno)));
    return false;
  }
  w.waiting_for = events;
  WaitForReady(shard);
  return true;
}

void WatchClient::StartTls(Shard& shard, Watch& w) {
  if (!Release(shard, w)) return;
  w.ssl = SSL_new(tls_ctx_);
  if (w.ssl == nullptr || SSL_set_fd(w.ssl, w.fd) != 1 ||
      X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(w.ssl),
                                    options_.proxy.address().to_string().c_str()) != 1) {
    End(shard, w, "TLS setup failed");
    return;
  }
  SSL_set_connect_state(w.ssl);
  w.phase = Watch::Phase::kHandshake;
  AdvanceTls(shard, w);
}

void WatchClient::AdvanceTls(Shard& shard, Watch& w) {
  int r = 0;
  ERR_clear_error();  // SSL_get_error reads the thread's queue.
  if (w.phase == Watch::Phase::kHandshake) {
    r = SSL_do_handshake(w.ssl);
    if (r == 1) w.phase = Watch::Phase::kRequest;
  }
  if (w.phase == Watch::Phase::kRequest) {
    // Without SSL_MODE_ENABLE_PARTIAL_WRITE: all of it, or a retry with the same arguments.
    r = SSL_write(w.ssl, w.request.data(), static_cast<int>(w.request.size()));
    if (r > 0) {
      w.phase = Watch::Phase::kEvents;
      WaitFor(shard, w, EPOLLIN);
      return;
    }
  }
  switch (SSL_get_error(w.ssl, r)) {
    case SSL_ERROR_WANT_READ:
      WaitFor(shard, w, EPOLLIN);
      return;
    case SSL_ERROR_WANT_WRITE:
      WaitFor(shard, w, EPOLLOUT);
      return;
    default:
      End(shard, w,
          absl::StrCat(
              w.phase == Watch::Phase::kHandshake ? "TLS handshake: " : "TLS send request: ",
              TlsErrorText(strerror(errno))));
  }
}

void WatchClient::WaitForReady(Shard& shard) {
  if (shard.ready_wait) return;
  shard.ready_wait = true;
  shard.ready_set.async_wait(asio::posix::stream_descriptor::wait_read,
                             [this, &shard](boost::system::error_code ec) {
                               shard.ready_wait = false;
                               if (ec) return;  // Closed: the run is over.
                               OnReady(shard);
                             });
}

void WatchClient::OnReady(Shard& shard) {
  std::array<epoll_event, kReadyPerRound> events;
  const int n = epoll_wait(shard.ready_set.native_handle(), events.data(), kReadyPerRound, 0);
  for (int i = 0; i < n; ++i) {
    Watch& w = *static_cast<Watch*>(events[static_cast<size_t>(i)].data.ptr);
    if (!w.open || w.fd < 0) continue;
    if (w.phase == Watch::Phase::kEvents) {
      OnReadable(shard, w);
    } else {
      AdvanceTls(shard, w);
    }
  }
  WaitForReady(shard);
}

void WatchClient::OnReadable(Shard& shard, Watch& w) {
  if (w.ssl != nullptr) {
    // A record at most per SSL_read (no read-ahead), so what is left stays in the socket and the
    // level-triggered set reports it again.
    for (int i = 0; i < kReadsPerWakeup; ++i) {
      ERR_clear_error();  // SSL_get_error reads the thread's queue.
      const int got = SSL_read(w.ssl, shard.buffer.data(), static_cast<int>(shard.buffer.size()));
      if (got > 0) {
        if (!Consume(shard, w, static_cast<size_t>(got))) return;
        continue;
      }
      const int err = SSL_get_error(w.ssl, got);
      if (err == SSL_ERROR_WANT_READ) return;
      End(shard, w,
          err == SSL_ERROR_ZERO_RETURN
              ? "closed by kube-fanout (close_notify)"
              : absl::StrCat("TLS read: ", TlsErrorText("connection ended")));
      return;
    }
    return;
  }
  for (int i = 0; i < kReadsPerWakeup; ++i) {
    const ssize_t got = ::read(w.fd, shard.buffer.data(), shard.buffer.size());
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) break;
    if (got <= 0) {
      End(shard, w, got == 0 ? "closed by kube-fanout" : "read: " + std::string(strerror(errno)));
      return;
    }
    const size_t n = static_cast<size_t>(got);
    if (!Consume(shard, w, n)) return;
    if (n < shard.buffer.size()) break;  // Drained, most likely; level-triggered if not.
  }
}

bool WatchClient::Consume(Shard& shard, Watch& w, size_t n) {
  const int64_t now = tools::UnixNanos();  // One receipt time per read.
  Bump(shard.bytes, n);
  const bool more = w.parser.Feed(std::string_view(shard.buffer.data(), n),
                                  [&](std::string_view line) { OnEvent(shard, w, line, now); });
  if (!w.connected && w.parser.head_done() &&
      w.parser.state() != tools::EventStreamParser::State::kError) {
    w.connected = true;
    Bump(shard.connected);
  }
  if (!more) {
    End(shard, w,
        w.parser.state() == tools::EventStreamParser::State::kDone
            ? "watch ended by kube-fanout"
            : "bad response: " + w.parser.error() + " [" + w.parser.head().substr(0, 200) + "]");
    return false;
  }
  return true;
}

void WatchClient::OnEvent(Shard& shard, Watch& w, std::string_view line, int64_t now) {
  const char type = tools::EventFields::TypeLetter(line);
  switch (type) {
    case 'B':
      Bump(shard.bookmarks);
      return;
    case 'E':
      Bump(shard.errors);
      NoteFailure("ERROR event: " + std::string(line.substr(0, 300)));
      return;
    case 'A':
      Bump(shard.added);
      break;
    case 'M':
      Bump(shard.modified);
      break;
    case 'D':
      Bump(shard.deleted);
      break;
    default:
      NoteFailure("not an event: " + std::string(line.substr(0, 120)));
      return;
  }
  const std::optional<int64_t> written = tools::EventFields::Annotation(line, shard.stamp_key);
  if (!written) {
    Bump(shard.initial);
  } else if (*written < measure_from_.load(std::memory_order_relaxed)) {
    Bump(shard.stale_stamps);
  } else {
    (w.pods ? shard.pod_latencies : shard.slice_latencies).RecordNanos(now - *written);
    ++w.measured;
    Bump(w.pods ? shard.measured_pods : shard.measured_slices);
  }
}

void WatchClient::CloseWatchSocket(Shard& shard, Watch& w, bool reset) {
  boost::system::error_code ignored;
  if (w.fd < 0) {
    if (reset) w.socket.set_option(asio::socket_base::linger(true, 0), ignored);
    w.socket.close(ignored);
    return;
  }
  if (w.waiting_for != 0) epoll_ctl(shard.ready_set.native_handle(), EPOLL_CTL_DEL, w.fd, nullptr);
  w.waiting_for = 0;
  if (w.ssl != nullptr) {
    SSL_free(w.ssl);  // No close_notify: the run is over, or the connection broke.
    w.ssl = nullptr;
  }
  if (reset) {
    const linger l{1, 0};  // RST: no TIME_WAIT carried into the next run.
    setsockopt(w.fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
  }
  ::close(w.fd);
  w.fd = -1;
}

void WatchClient::End(Shard& shard, Watch& w, const std::string& reason) {
  if (!w.open) return;
  w.open = false;
  boost::system::error_code ignored;
  if (w.conn == nullptr) CloseWatchSocket(shard, w, /*reset=*/false);
  Bump(w.connected ? shard.ended : shard.failed);
  NoteFailure(absl::StrCat("watch ", w.index, w.connected ? " ended: " : " failed: ", reason));
}

void WatchClient::NoteFailure(const std::string& message) {
  std::lock_guard lock(failures_mu_);
  ++failure_count_;
  if (failures_.size() < kMaxFailureSamples) failures_.push_back(message);
}

void WatchClient::CloseAll() {
  for (auto& s : shards_) {
    Shard* shard = s.get();
    asio::post(shard->ioc, [shard] {
      for (auto& [index, w] : shard->watches) {
        if (!w->open) continue;
        w->open = false;
        if (w->conn != nullptr) continue;
        CloseWatchSocket(*shard, *w, /*reset=*/true);
      }
      for (auto& [n, c] : shard->conns) {
        if (!c->open) continue;
        c->open = false;
        boost::system::error_code ignored;
        c->socket.set_option(asio::socket_base::linger(true, 0), ignored);
        c->socket.close(ignored);
      }
      boost::system::error_code ignored;
      shard->ready_set.close(ignored);  // Its wait ends; the thread can finish.
      shard->guard.reset();
    });
  }
}

void WatchClient::Join(std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (auto& s : shards_) {
    while (!s->finished && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    s->ioc.stop();
    if (s->thread.joinable()) s->thread.join();
  }
}

WatchClient::Totals WatchClient::GetTotals() const {
  Totals t;
  for (const auto& s : shards_) {
    auto get = [](const std::atomic<uint64_t>& c) { return c.load(std::memory_order_relaxed); };
    t.opened += get(s->opened);
    t.connections += get(s->connections);
    t.connected += get(s->connected);
    t.failed += get(s->failed);
    t.ended += get(s->ended);
    t.bytes += get(s->bytes);
    t.initial += get(s->initial);
    t.stale_stamps += get(s->stale_stamps);
    t.bookmarks += get(s->bookmarks);
    t.errors += get(s->errors);
    t.measured_pods += get(s->measured_pods);
    t.measured_slices += get(s->measured_slices);
    t.added += get(s->added);
    t.modified += get(s->modified);
    t.deleted += get(s->deleted);
  }
  return t;
}

tools::LatencyHistogram WatchClient::Latencies() const {
  tools::LatencyHistogram all = Latencies(true);
  all.Merge(Latencies(false));
  return all;
}

tools::LatencyHistogram WatchClient::Latencies(bool pods) const {
  tools::LatencyHistogram all;
  for (const auto& s : shards_) all.Merge(pods ? s->pod_latencies : s->slice_latencies);
  return all;
}

std::vector<WatchClient::PerWatch> WatchClient::PerWatchResults(int n) const {
  std::vector<PerWatch> out(static_cast<size_t>(std::max(0, n)));
  for (const auto& s : shards_) {
    for (const auto& [index, w] : s->watches) {
      if (index < 0 || index >= n) continue;
      out[static_cast<size_t>(index)] = PerWatch{w->connected, w->open, w->measured};
    }
  }
  return out;
}

std::vector<std::string> WatchClient::FailureSamples() const {
  std::lock_guard lock(failures_mu_);
  std::vector<std::string> out = failures_;
  if (failure_count_ > failures_.size()) {
    out.push_back(absl::StrCat("... ", failure_count_ - failures_.size(), " more"));
  }
  return out;
}

// --- HTTP/2 -------------------------------------------------------------------------------------

namespace {

int H2HeaderCb(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name, size_t namelen,
               const uint8_t* value, size_t valuelen, uint8_t, void* user);
int H2DataCb(nghttp2_session*, uint8_t, int32_t stream_id, const uint8_t* data, size_t len,
             void* user);
int H2CloseCb(nghttp2_session*, int32_t stream_id, uint32_t error_code, void* user);

}  // namespace

void WatchClient::OpenStream(Shard& shard, Watch& w) {
  const int n = w.index / options_.streams_per_connection;
  auto [it, inserted] = shard.conns.emplace(n, nullptr);
  if (inserted) {
    it->second = std::make_unique<Conn>(shard.ioc);
    it->second->number = static_cast<uint64_t>(n);
    it->second->client = this;
    it->second->shard = &shard;
    Bump(shard.connections);
  }
  Conn& conn = *it->second;
  w.conn = &conn;
  if (!conn.open) {
    End(shard, w, "connection closed");
    return;
  }
  if (!conn.connected) {
    conn.pending.push_back(&w);
    if (inserted) ConnectH2(shard, conn);
    return;
  }
  SubmitStream(shard, conn, w);
  SendH2(shard, conn);
}

void WatchClient::ConnectH2(Shard& shard, Conn& conn) {
  if (options_.source_ips > 1) {
    boost::system::error_code ec;
    tools::OpenFromLoopbackSource(conn.socket,
                                  conn.number % static_cast<uint64_t>(options_.source_ips), ec);
    if (ec) {
      EndConn(shard, conn, "bind source address: " + ec.message());
      return;
    }
  }
  conn.socket.async_connect(options_.proxy, [this, &shard, &conn](boost::system::error_code ec) {
    if (ec) {
      if (ec != asio::error::operation_aborted) EndConn(shard, conn, "connect: " + ec.message());
      return;
    }
    if (options_.tls && !HandshakeH2(shard, conn)) return;
    conn.socket.non_blocking(true, ec);
    nghttp2_session_callbacks* cb = nullptr;
    nghttp2_session_callbacks_new(&cb);
    nghttp2_session_callbacks_set_on_header_callback(cb, &H2HeaderCb);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, &H2DataCb);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, &H2CloseCb);
    nghttp2_session_client_new(&conn.session, cb, &conn);
    nghttp2_session_callbacks_del(cb);
    // client-go's windows: 4 MiB per stream (Go's transport default), so a watch is not held
    // back by flow control; the connection's the same.
    const nghttp2_settings_entry settings[] = {{NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 4 << 20}};
    nghttp2_submit_settings(conn.session, NGHTTP2_FLAG_NONE, settings, 1);
    nghttp2_session_set_local_window_size(conn.session, NGHTTP2_FLAG_NONE, 0, 4 << 20);
    conn.connected = true;
    for (Watch* w : conn.pending) SubmitStream(shard, conn, *w);
    conn.pending.clear();
    SendH2(shard, conn);
    WaitH2(shard, conn);
  });
}

bool WatchClient::HandshakeH2(Shard& shard, Conn& conn) {
  // Blocking, bounded by the socket's timeouts: a thousand connections' handshakes cost the
  // client's thread a few seconds of the ramp, before anything is measured.
  const int fd = conn.socket.native_handle();
  const timeval limit{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof(limit));
  boost::system::error_code ec;
  conn.socket.non_blocking(false, ec);
  static constexpr unsigned char kAlpn[] = {2, 'h', '2'};
  conn.ssl = SSL_new(tls_ctx_);
  ERR_clear_error();
  if (conn.ssl == nullptr || SSL_set_fd(conn.ssl, fd) != 1 ||
      SSL_set_alpn_protos(conn.ssl, kAlpn, sizeof(kAlpn)) != 0 ||
      X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(conn.ssl),
                                    options_.proxy.address().to_string().c_str()) != 1 ||
      SSL_connect(conn.ssl) != 1) {
    EndConn(shard, conn, "TLS handshake: " + TlsErrorText(strerror(errno)));
    return false;
  }
  const unsigned char* proto = nullptr;
  unsigned int proto_len = 0;
  SSL_get0_alpn_selected(conn.ssl, &proto, &proto_len);
  if (std::string_view(reinterpret_cast<const char*>(proto), proto_len) != "h2") {
    EndConn(shard, conn, "TLS: the server did not choose h2 (ALPN)");
    return false;
  }
  return true;
}

void WatchClient::SubmitStream(Shard& shard, Conn& conn, Watch& w) {
  const std::string path = w.pods ? absl::StrCat(pod_path_prefix_, w.node) : slice_path_;
  const std::string authority =
      absl::StrCat(options_.proxy.address().to_string(), ":", options_.proxy.port());
  const std::string accept = options_.protobuf
                                 ? "application/vnd.kubernetes.protobuf,application/json"
                                 : "application/json";
  const std::string auth = absl::StrCat("Bearer ", options_.token);
  auto nv = [](std::string_view n, std::string_view v) {
    return nghttp2_nv{reinterpret_cast<uint8_t*>(const_cast<char*>(n.data())),
                      reinterpret_cast<uint8_t*>(const_cast<char*>(v.data())), n.size(), v.size(),
                      NGHTTP2_NV_FLAG_NONE};
  };
  const nghttp2_nv headers[] = {
      nv(":method", "GET"),        nv(":scheme", conn.ssl != nullptr ? "https" : "http"),
      nv(":authority", authority), nv(":path", path),
      nv("accept", accept),        nv("user-agent", "kf-fanout-bench/0.1"),
      nv("authorization", auth)};
  const int32_t id = nghttp2_submit_request(conn.session, nullptr, headers,
                                            sizeof(headers) / sizeof(headers[0]), nullptr, &w);
  if (id < 0) {
    End(shard, w, absl::StrCat("submit: ", nghttp2_strerror(id)));
    return;
  }
  w.stream_id = id;
  w.parser.StartBody();
  conn.streams[id] = &w;
}

void WatchClient::SendH2(Shard& shard, Conn& conn) {
  for (;;) {
    const uint8_t* data = nullptr;
    const ssize_t n = nghttp2_session_mem_send(conn.session, &data);
    if (n < 0) {
      EndConn(shard, conn, absl::StrCat("send: ", nghttp2_strerror(static_cast<int>(n))));
      return;
    }
    if (n == 0) return;
    // Small frames (settings, window updates, requests): written at once, waiting if the
    // socket is full.
    boost::system::error_code ec;
    conn.socket.non_blocking(false, ec);
    if (conn.ssl != nullptr) {
      // Blocking (the whole record, or an error).
      ERR_clear_error();
      if (SSL_write(conn.ssl, data, static_cast<int>(n)) <= 0) {
        ec = asio::error::broken_pipe;
      }
    } else {
      asio::write(conn.socket, asio::buffer(data, static_cast<size_t>(n)), ec);
    }
    boost::system::error_code ignored;
    conn.socket.non_blocking(true, ignored);
    if (ec) {
      EndConn(
          shard, conn,
          "write: " + (conn.ssl != nullptr ? TlsErrorText(ec.message().c_str()) : ec.message()));
      return;
    }
  }
}

void WatchClient::WaitH2(Shard& shard, Conn& conn) {
  conn.socket.async_wait(asio::ip::tcp::socket::wait_read, [this, &shard,
                                                            &conn](boost::system::error_code ec) {
    if (ec || !conn.open) {
      if (ec != asio::error::operation_aborted && conn.open) {
        EndConn(shard, conn, "wait: " + ec.message());
      }
      return;
    }
    for (int i = 0; i < kReadsPerWakeup; ++i) {
      boost::system::error_code rec;
      const size_t n = conn.ssl != nullptr ? ReadTls(conn.ssl, shard, rec)
                                           : conn.socket.read_some(asio::buffer(shard.buffer), rec);
      if (rec == asio::error::would_block || rec == asio::error::try_again) break;
      if (rec) {
        EndConn(shard, conn, rec == asio::error::eof ? "closed by kube-fanout" : rec.message());
        return;
      }
      Bump(shard.bytes, n);
      const ssize_t used = nghttp2_session_mem_recv(
          conn.session, reinterpret_cast<const uint8_t*>(shard.buffer.data()), n);
      if (used < 0) {
        EndConn(shard, conn, nghttp2_strerror(static_cast<int>(used)));
        return;
      }
      // TLS: a record per read, until OpenSSL wants the socket again (would_block).
      if (conn.ssl == nullptr && n < shard.buffer.size()) break;
    }
    SendH2(shard, conn);
    if (conn.open) WaitH2(shard, conn);
  });
}

size_t WatchClient::ReadTls(SSL* ssl, Shard& shard, boost::system::error_code& ec) {
  ERR_clear_error();
  const int got = SSL_read(ssl, shard.buffer.data(), static_cast<int>(shard.buffer.size()));
  if (got > 0) return static_cast<size_t>(got);
  switch (SSL_get_error(ssl, got)) {
    case SSL_ERROR_WANT_READ:
      ec = asio::error::would_block;
      break;
    case SSL_ERROR_ZERO_RETURN:
      ec = asio::error::eof;
      break;
    default:
      ec = asio::error::connection_reset;
  }
  return 0;
}

void WatchClient::EndConn(Shard& shard, Conn& conn, const std::string& reason) {
  if (!conn.open) return;
  conn.open = false;
  boost::system::error_code ignored;
  conn.socket.close(ignored);
  for (Watch* w : conn.pending) End(shard, *w, reason);
  for (auto& [id, w] : conn.streams) End(shard, *w, reason);
}

namespace {

int H2HeaderCb(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name, size_t namelen,
               const uint8_t* value, size_t valuelen, uint8_t, void* user) {
  auto* conn = static_cast<WatchClient::Conn*>(user);
  if (frame->hd.type != NGHTTP2_HEADERS) return 0;
  if (std::string_view(reinterpret_cast<const char*>(name), namelen) != ":status") return 0;
  return conn->client->OnH2Status(*conn, frame->hd.stream_id,
                                  std::string_view(reinterpret_cast<const char*>(value), valuelen));
}

int H2DataCb(nghttp2_session*, uint8_t, int32_t stream_id, const uint8_t* data, size_t len,
             void* user) {
  auto* conn = static_cast<WatchClient::Conn*>(user);
  return conn->client->OnH2Data(*conn, stream_id,
                                std::string_view(reinterpret_cast<const char*>(data), len));
}

int H2CloseCb(nghttp2_session*, int32_t stream_id, uint32_t error_code, void* user) {
  auto* conn = static_cast<WatchClient::Conn*>(user);
  return conn->client->OnH2Close(*conn, stream_id, error_code);
}

}  // namespace

int WatchClient::OnH2Status(Conn& conn, int32_t id, std::string_view status) {
  auto it = conn.streams.find(id);
  if (it == conn.streams.end()) return 0;
  Watch& w = *it->second;
  if (status == "200") {
    if (!w.connected) {
      w.connected = true;
      Bump(conn.shard->connected);
    }
  } else {
    End(*conn.shard, w, absl::StrCat("HTTP status ", std::string(status)));
  }
  return 0;
}

int WatchClient::OnH2Data(Conn& conn, int32_t id, std::string_view data) {
  auto it = conn.streams.find(id);
  if (it == conn.streams.end() || !it->second->open) return 0;
  Watch& w = *it->second;
  const int64_t now = tools::UnixNanos();
  Shard& shard = *conn.shard;
  if (!w.parser.Feed(data, [&](std::string_view line) { OnEvent(shard, w, line, now); })) {
    End(shard, w, "bad stream: " + w.parser.error());
  }
  return 0;
}

int WatchClient::OnH2Close(Conn& conn, int32_t id, uint32_t error_code) {
  auto it = conn.streams.find(id);
  if (it == conn.streams.end()) return 0;
  End(*conn.shard, *it->second,
      error_code == 0 ? "watch ended by kube-fanout"
                      : absl::StrCat("stream reset: ", nghttp2_http2_strerror(error_code)));
  return 0;
}

}  // namespace kf::bench
