#include "tests/load/agents.h"

#include <netinet/in.h>
#include <nghttp2/nghttp2.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cerrno>
#include <cstring>
#include <exception>
#include <functional>
#include <optional>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/strings.h"
#include "tests/load/list_scanner.h"
#include "tests/load/readiness.h"
#include "tests/load/wire.h"
#include "tests/tools/event_stream_parser.h"
#include "tests/tools/loopback_source.h"
#include "tests/tools/resource_version.h"
#include "tests/tools/response_reader.h"
#include "tests/tools/write_stamp.h"

namespace kf::load {
namespace {

using asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using std::chrono::seconds;
constexpr auto use_nothrow = asio::as_tuple(asio::use_awaitable);

constexpr size_t kReadBuffer = 64 << 10;  // Per thread: every read lands here, then is parsed.
constexpr int kReadsPerWakeup = 16;       // Then let the other connections have a turn.
constexpr auto kConnectTimeout = seconds(15);
constexpr auto kRequestTimeout = seconds(60);
constexpr auto kWatchGrace = seconds(30);  // Past the watch's own timeoutSeconds.
constexpr auto kShortWatch = seconds(1);   // A watch that ends sooner backs off first.
constexpr int kMaxListPages = 100000;
constexpr size_t kMaxFailureKinds = 32;
// client-go's HTTP/2 windows (Go's transport defaults): 4 MiB per stream, 1 GiB per connection.
constexpr int32_t kH2StreamWindow = 4 << 20;
constexpr int32_t kH2ConnectionWindow = 1 << 30;

void Bump(std::atomic<uint64_t>& c, uint64_t n = 1) {
  // Single writer (the shard's thread): a plain load and store, no locked instruction.
  c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

uint64_t Get(const std::atomic<uint64_t>& c) { return c.load(std::memory_order_relaxed); }

std::string ErrorText(std::string_view what, const boost::system::error_code& ec) {
  return absl::StrCat(ToAbsl(what), ": ", ec.message());
}

// What OpenSSL says went wrong, and clears its (per-thread) error queue, which would otherwise
// confuse SSL_get_error on the next connection this thread serves.
std::string SslErrorText(std::string_view what, SSL* ssl, int code) {
  std::string out = absl::StrCat(ToAbsl(what), ": ssl error ", code);
  if (code == SSL_ERROR_SYSCALL && errno != 0) absl::StrAppend(&out, " (", strerror(errno), ")");
  for (unsigned long e = ERR_get_error(); e != 0; e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    absl::StrAppend(&out, "; ", buf);
  }
  if (ssl != nullptr && SSL_get_verify_result(ssl) != X509_V_OK) {
    absl::StrAppend(&out,
                    "; certificate: ", X509_verify_cert_error_string(SSL_get_verify_result(ssl)));
  }
  return out;
}

struct SslFree {
  void operator()(SSL* ssl) const { SSL_free(ssl); }
};

}  // namespace

// One connection, plain or TLS; counted as open from the end of its handshake to its
// destruction. TLS is OpenSSL straight on the non-blocking socket: Asio's ssl::stream would add
// four 17 KiB buffers to every connection (measured: ~90 KiB per TLS watch with it, ~25 without).
struct AgentPool::Conn {
  Conn(AgentPool& p, asio::io_context& ioc) : pool(p), socket(ioc) {}
  ~Conn() {
    if (counted) pool.open_connections_.fetch_sub(1, std::memory_order_relaxed);
  }

  AgentPool& pool;
  tcp::socket socket;
  std::unique_ptr<SSL, SslFree> ssl;
  bool counted = false;
  bool reused = false;  // Carried a request before.
};

struct AgentPool::Shard {
  Shard(AgentPool& p, uint64_t seed) : pool(p), sweeper(ioc), rng(seed) {
    stamp_key = absl::StrCat("\"", ToAbsl(tools::kWrittenAtAnnotation), "\":\"");
  }

  AgentPool& pool;
  asio::io_context ioc{1};
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> guard;
  std::thread thread;
  std::atomic<bool> finished{false};
  asio::steady_timer sweeper;
  std::mt19937_64 rng;
  std::string stamp_key;
  // Touched only on this shard's thread (and after Stop).
  bool stopping = false;
  std::vector<std::unique_ptr<Task>> tasks;
  std::array<char, kReadBuffer> read_buffer;
  std::array<tools::LatencyHistogram, kKinds> latency;
  tools::LatencyHistogram list_latency, get_latency;
  std::map<int, uint64_t> by_status;
  uint64_t errors = 0, timeouts = 0, watch_ends = 0;
  // Written by this shard's thread, read by anyone.
  std::array<std::atomic<uint64_t>, kVerbs> by_verb{};
  std::atomic<uint64_t> requests{0}, failed_requests{0}, events{0}, bookmarks{0}, relists{0};
  std::atomic<uint64_t> watch_bytes{0};  // Bytes read on watch streams (head and framing too).

  double Uniform() { return std::uniform_real_distribution<double>(0, 1)(rng); }
};

// What every agent connection does: connect, one request and its whole response, sleep; and
// what the shard does to it: close it at its deadline or at the end.
class AgentPool::Task {
 public:
  explicit Task(Shard& shard) : shard_(shard), pool_(shard.pool), timer_(shard.ioc) {}
  virtual ~Task() = default;
  Task(const Task&) = delete;
  Task& operator=(const Task&) = delete;

  virtual asio::awaitable<void> Run() = 0;

  // Closes the connection (or the HTTP/2 stream) under whatever the coroutine is waiting on; it
  // sees an error.
  void Abort(bool reset) {
    if (h2_stream_ != nullptr) AbortStream();
    if (!conn_) return;
    boost::system::error_code ignored;
    tcp::socket& s = conn_->socket;
    if (reset) s.set_option(asio::socket_base::linger(true, 0), ignored);
    s.close(ignored);
  }
  void Cancel() {
    Abort(true);
    timer_.cancel();
  }
  bool Overdue(Clock::time_point now) const {
    return (conn_ || h2_stream_ != nullptr) && now > deadline_;
  }
  // The client certificate this agent's connections present (its requests then carry no token).
  void SetCredential(std::shared_ptr<const NodeCredential> c) { credential_ = std::move(c); }
  // Requests go as streams on the agent's HTTP/2 connection.
  void SetLink(H2Link* link) { link_ = link; }

 protected:
  struct Reply {
    int status = 0;  // 0: no complete response.
    bool keep_alive = false;
    std::string error;
  };

  asio::awaitable<bool> Connect();
  // Completes the TLS handshake; empty, or what went wrong.
  asio::awaitable<std::string> Handshake();
  asio::awaitable<std::string> WriteAll(std::string_view data);
  enum class ReadEnd { kConsumed, kEof, kError };
  // Reads whatever arrives into the thread's buffer and hands it to consume(string_view), which
  // returns false to stop, until then or until the connection ends or fails. No buffer is held
  // while waiting.
  template <typename Consume>
  asio::awaitable<ReadEnd> ReadUntil(Consume& consume, std::string* error);
  // One request on the current connection (made first if needed), its whole response read and
  // its body handed to `scanner` when given; counted by verb and status, timed. A reused
  // connection the server had closed is replaced once, uncounted.
  asio::awaitable<Reply> Request(Verb verb, const std::string& target, ListScanner* scanner);
  // The same as a stream on the agent's HTTP/2 connection.
  asio::awaitable<Reply> RequestH2(Verb verb, const std::string& target, ListScanner* scanner);
  void AbortStream();
  // False when the pool is stopping.
  asio::awaitable<bool> Sleep(Clock::duration d);
  std::string RequestText(std::string_view target) const {
    return absl::StrCat("GET ", ToAbsl(target), " HTTP/1.1\r\n",
                        credential_ ? pool_.certificate_headers_ : pool_.request_headers_);
  }
  bool stopping() const { return shard_.stopping; }
  void Count(Verb verb) {
    Bump(shard_.by_verb[verb]);
    Bump(shard_.requests);
  }
  void CountStatus(int status) { ++shard_.by_status[status]; }
  void RecordLatency(Verb verb, Clock::time_point sent) {
    const int64_t took =
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - sent).count();
    if (verb == kList) shard_.list_latency.RecordNanos(took);
    if (verb == kGet) shard_.get_latency.RecordNanos(took);
  }
  void CountError() {
    ++shard_.errors;
    Bump(shard_.failed_requests);
  }

  Shard& shard_;
  AgentPool& pool_;
  std::unique_ptr<Conn> conn_;
  asio::steady_timer timer_;
  Clock::time_point deadline_ = Clock::time_point::max();
  std::shared_ptr<const NodeCredential> credential_;
  H2Link* link_ = nullptr;         // The agent's HTTP/2 connection, when it speaks HTTP/2.
  H2Stream* h2_stream_ = nullptr;  // This task's open stream on it.
  bool alpn_h2_ = false;           // The TLS handshake offers h2 only (H2Link's).
};

asio::awaitable<bool> AgentPool::Task::Connect() {
  if (stopping()) co_return false;
  conn_ = std::make_unique<Conn>(pool_, shard_.ioc);
  tcp::socket& s = conn_->socket;
  boost::system::error_code ec;
  const tcp::endpoint& address = pool_.NextAddress();
  s.open(address.protocol(), ec);
  if (!ec && pool_.options_.source_ips > 1) {
    const uint64_t k = pool_.next_source_.fetch_add(1, std::memory_order_relaxed) %
                       static_cast<uint64_t>(pool_.options_.source_ips);
    tools::OpenFromLoopbackSource(s, k, ec);
  }
  std::string failure;
  if (ec) {
    failure = ErrorText("socket", ec);
  } else {
    deadline_ = Clock::now() + kConnectTimeout;
    auto [cec] = co_await s.async_connect(address, use_nothrow);
    if (cec) {
      failure = ErrorText("connect", cec);
    } else {
      s.set_option(tcp::no_delay(true), ec);
      s.non_blocking(true, ec);  // Reads and writes are tried first, waited for when they block.
      if (pool_.ssl_) failure = co_await Handshake();
    }
  }
  deadline_ = Clock::time_point::max();
  if (!failure.empty() || stopping()) {
    conn_.reset();
    if (!stopping()) {
      pool_.failed_connections_.fetch_add(1, std::memory_order_relaxed);
      pool_.NoteFailure(failure);
    }
    co_return false;
  }
  conn_->counted = true;
  const uint64_t open = pool_.open_connections_.fetch_add(1, std::memory_order_relaxed) + 1;
  uint64_t peak = pool_.peak_connections_.load(std::memory_order_relaxed);
  while (open > peak && !pool_.peak_connections_.compare_exchange_weak(peak, open)) {
  }
  co_return true;
}

asio::awaitable<std::string> AgentPool::Task::Handshake() {
  conn_->ssl.reset(SSL_new(pool_.ssl_->native_handle()));
  SSL* ssl = conn_->ssl.get();
  if (ssl == nullptr || SSL_set_fd(ssl, conn_->socket.native_handle()) != 1) {
    co_return SslErrorText("TLS setup", nullptr, 0);
  }
  if (credential_ && (SSL_use_certificate(ssl, credential_->cert) != 1 ||
                      SSL_use_PrivateKey(ssl, credential_->key) != 1)) {
    co_return SslErrorText("client certificate", nullptr, 0);
  }
  static constexpr unsigned char kAlpnH2[] = {2, 'h', '2'};
  if (alpn_h2_ && SSL_set_alpn_protos(ssl, kAlpnH2, sizeof(kAlpnH2)) != 0) {
    co_return SslErrorText("ALPN", nullptr, 0);
  }
  const std::string& host = pool_.target_.host;
  boost::system::error_code addr_ec;
  (void)asio::ip::make_address(host, addr_ec);
  if (addr_ec) {  // A name: SNI, and the certificate must carry it.
    SSL_set_tlsext_host_name(ssl, host.c_str());
    SSL_set1_host(ssl, host.c_str());
  } else {  // An address: the certificate must carry it as an IP SAN.
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host.c_str());
  }
  for (;;) {
    ERR_clear_error();
    const int r = SSL_connect(ssl);
    if (r == 1) {
      if (!alpn_h2_) co_return std::string();
      const unsigned char* proto = nullptr;
      unsigned int len = 0;
      SSL_get0_alpn_selected(ssl, &proto, &len);
      if (len == 2 && std::memcmp(proto, "h2", 2) == 0) co_return std::string();
      co_return std::string("TLS handshake: the server did not select h2 by ALPN");
    }
    const int e = SSL_get_error(ssl, r);
    if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) {
      co_return SslErrorText("TLS handshake", ssl, e);
    }
    auto [wec] = co_await conn_->socket.async_wait(
        e == SSL_ERROR_WANT_READ ? tcp::socket::wait_read : tcp::socket::wait_write, use_nothrow);
    if (wec) co_return ErrorText("TLS handshake", wec);
  }
}

asio::awaitable<std::string> AgentPool::Task::WriteAll(std::string_view data) {
  tcp::socket& s = conn_->socket;
  SSL* ssl = conn_->ssl.get();
  while (!data.empty()) {
    auto want = tcp::socket::wait_write;
    if (ssl != nullptr) {
      // After a WANT_*, OpenSSL wants the same buffer again: it is (the rest of `data`).
      ERR_clear_error();
      size_t written = 0;
      const int r = SSL_write_ex(ssl, data.data(), data.size(), &written);
      if (r == 1) {
        data.remove_prefix(written);
        continue;
      }
      const int e = SSL_get_error(ssl, r);
      if (e == SSL_ERROR_WANT_READ) {
        want = tcp::socket::wait_read;
      } else if (e != SSL_ERROR_WANT_WRITE) {
        co_return SslErrorText("write", ssl, e);
      }
    } else {
      boost::system::error_code ec;
      const size_t n = s.write_some(asio::buffer(data.data(), data.size()), ec);
      if (!ec) {
        data.remove_prefix(n);
        continue;
      }
      if (ec != asio::error::would_block && ec != asio::error::try_again) {
        co_return ErrorText("write", ec);
      }
    }
    auto [wec] = co_await s.async_wait(want, use_nothrow);
    if (wec) co_return ErrorText("write", wec);
  }
  co_return std::string();
}

template <typename Consume>
asio::awaitable<AgentPool::Task::ReadEnd> AgentPool::Task::ReadUntil(Consume& consume,
                                                                     std::string* error) {
  tcp::socket& s = conn_->socket;
  SSL* ssl = conn_->ssl.get();
  char* buffer = shard_.read_buffer.data();
  const size_t size = shard_.read_buffer.size();
  for (;;) {
    // Closed under us (deadline, stop) while we let others read: OpenSSL knows only the fd
    // number, which a new connection may have been given by now.
    if (!s.is_open()) {
      *error = "closed";
      co_return ReadEnd::kError;
    }
    // Read while there is something (TLS may hold decrypted bytes the socket no longer shows),
    // parse it at once: the buffer is the thread's, and is someone else's after a co_await.
    std::optional<tcp::socket::wait_type> want;
    for (int i = 0; i < kReadsPerWakeup && !want; ++i) {
      size_t n = 0;
      if (ssl != nullptr) {
        ERR_clear_error();
        if (SSL_read_ex(ssl, buffer, size, &n) != 1) {
          const int e = SSL_get_error(ssl, 0);
          if (e == SSL_ERROR_WANT_READ) {
            want = tcp::socket::wait_read;
          } else if (e == SSL_ERROR_WANT_WRITE) {
            want = tcp::socket::wait_write;
          } else if (e == SSL_ERROR_ZERO_RETURN) {
            co_return ReadEnd::kEof;
          } else {
            *error = SslErrorText("read", ssl, e);
            co_return ReadEnd::kError;
          }
          continue;
        }
      } else {
        boost::system::error_code ec;
        n = s.read_some(asio::buffer(buffer, size), ec);
        if (ec == asio::error::would_block || ec == asio::error::try_again) {
          want = tcp::socket::wait_read;
          continue;
        }
        if (ec == asio::error::eof) co_return ReadEnd::kEof;
        if (ec) {
          *error = ErrorText("read", ec);
          co_return ReadEnd::kError;
        }
      }
      if (!consume(std::string_view(buffer, n))) co_return ReadEnd::kConsumed;
    }
    if (want) {
      auto [ec] = co_await s.async_wait(*want, use_nothrow);
      if (ec) {
        *error = ErrorText("wait", ec);
        co_return ReadEnd::kError;
      }
    } else {
      // Still more to read: let the thread's other connections have their turn first.
      co_await asio::post(shard_.ioc, asio::use_awaitable);
      if (stopping()) co_return ReadEnd::kError;
    }
  }
}

asio::awaitable<AgentPool::Task::Reply> AgentPool::Task::Request(Verb verb,
                                                                 const std::string& target,
                                                                 ListScanner* scanner) {
  if (link_ != nullptr) {
    Reply h2 = co_await RequestH2(verb, target, scanner);
    co_return h2;
  }
  Count(verb);
  const std::string request = RequestText(target);
  for (int attempt = 0;; ++attempt) {
    Reply r;
    if (!conn_ && !co_await Connect()) {
      r.error = "no connection";
      if (!stopping()) CountError();
      co_return r;
    }
    const bool reused = conn_->reused;
    conn_->reused = true;
    const auto sent = Clock::now();
    deadline_ = sent + kRequestTimeout;
    tools::ResponseReader reader;
    r.error = co_await WriteAll(request);
    if (r.error.empty()) {
      const auto on_body = [scanner, &reader](std::string_view body) {
        if (scanner != nullptr && reader.status() == 200) scanner->Feed(body);
      };
      auto consume = [&reader, &on_body](std::string_view data) {
        return reader.Feed(data, on_body);
      };
      const ReadEnd end = co_await ReadUntil(consume, &r.error);
      if (end == ReadEnd::kEof) reader.OnEof();
      if (reader.done()) {
        r.status = reader.status();
        r.keep_alive = reader.keep_alive();
      } else if (r.error.empty()) {
        r.error = reader.failed() ? reader.error() : "connection closed";
      }
    }
    deadline_ = Clock::time_point::max();
    if (stopping()) {
      r.status = 0;
      co_return r;
    }
    if (r.status == 0) {
      conn_.reset();
      // The server closed a keep-alive connection we had not used for a while: try a new one.
      if (reused && !reader.got_some() && attempt == 0) {
        if (scanner != nullptr) *scanner = ListScanner();
        continue;
      }
      CountError();
      pool_.NoteFailure(absl::StrCat(ToAbsl(target), ": ", r.error));
      co_return r;
    }
    RecordLatency(verb, sent);
    CountStatus(r.status);
    if (!r.keep_alive) conn_.reset();
    co_return r;
  }
}

asio::awaitable<bool> AgentPool::Task::Sleep(Clock::duration d) {
  if (stopping()) co_return false;
  timer_.expires_after(d);
  co_await timer_.async_wait(use_nothrow);  // Cancelled only by the stop.
  co_return !stopping();
}

// One request on an HTTP/2 connection: what the link fills in while its task waits.
struct AgentPool::H2Stream {
  explicit H2Stream(asio::io_context& ioc) : wake(ioc) {}
  ~H2Stream();
  H2Stream(const H2Stream&) = delete;
  H2Stream& operator=(const H2Stream&) = delete;

  std::string target;
  int status = 0;       // From :status; 0 while none came.
  bool closed = false;  // Ended: completely (error empty) or not.
  std::string error;
  std::function<void()> on_headers;               // After :status.
  std::function<bool(std::string_view)> on_data;  // Body bytes; false resets the stream.
  asio::steady_timer wake;                        // Cancelled on every change.
  H2Link* link = nullptr;
  int32_t id = 0;  // While open on the connection.

  void Wake() { wake.cancel(); }
  // Until the stream has ended.
  asio::awaitable<void> Wait() {
    while (!closed) {
      wake.expires_at(Clock::time_point::max());
      co_await wake.async_wait(use_nothrow);
    }
  }
};

// A node agent's one HTTP/2 connection (nghttp2's client session): every LIST, GET and WATCH
// of the agent is a stream on it, as client-go's transport multiplexes a process's requests.
// Connected at the first stream, and again at the next stream after it ends; a connection that
// ends ends all its streams (their reflectors then re-watch, as client-go's do). A Task only for
// the shard's sweep and stop: its connect has a deadline, and the stop closes it.
class AgentPool::H2Link : public AgentPool::Task {
 public:
  explicit H2Link(Shard& shard) : Task(shard) { alpn_h2_ = true; }
  ~H2Link() override {
    if (session_ != nullptr) nghttp2_session_del(session_);
  }

  // Connects, then reads until the connection ends; again while streams are waiting for one.
  asio::awaitable<void> Run() override;

  void Open(H2Stream& s) {
    s.link = this;
    if (session_ != nullptr && !goaway_) {
      Submit(s);
      Flush();
      return;
    }
    waiting_.push_back(&s);
    if (!running_ && !stopping()) {
      running_ = true;
      asio::co_spawn(shard_.ioc, Run(), asio::detached);
    }
  }

  // The task gives up on the stream (deadline, stop): RST_STREAM CANCEL.
  void Close(H2Stream& s, std::string_view why) {
    std::erase(waiting_, &s);
    if (s.id > 0 && session_ != nullptr) {
      nghttp2_session_set_stream_user_data(session_, s.id, nullptr);
      nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, s.id, NGHTTP2_CANCEL);
      Flush();
    }
    End(s, std::string(why));
  }

 private:
  static void End(H2Stream& s, std::string error) {
    if (s.closed) return;
    s.closed = true;
    s.id = 0;
    if (s.error.empty()) s.error = std::move(error);
    s.Wake();
  }
  static H2Stream* StreamOf(nghttp2_session* session, int32_t id) {
    return static_cast<H2Stream*>(nghttp2_session_get_stream_user_data(session, id));
  }
  void Submit(H2Stream& s);
  // Everything nghttp2 has to send, written by one writer at a time.
  void Flush();
  asio::awaitable<void> WriteOut();
  void EndAll(const std::string& why);

  static int OnHeader(nghttp2_session* session, const nghttp2_frame* frame, const uint8_t* name,
                      size_t namelen, const uint8_t* value, size_t valuelen, uint8_t, void* user);
  static int OnData(nghttp2_session* session, uint8_t, int32_t id, const uint8_t* data, size_t len,
                    void* user);
  static int OnClose(nghttp2_session* session, int32_t id, uint32_t error_code, void* user);
  static int OnFrame(nghttp2_session*, const nghttp2_frame* frame, void* user);

  nghttp2_session* session_ = nullptr;
  bool running_ = false, writing_ = false, goaway_ = false;
  std::vector<H2Stream*> waiting_;  // For a connection.
  std::string out_;
};

AgentPool::H2Stream::~H2Stream() {
  if (link != nullptr && !closed) link->Close(*this, "abandoned");
}

asio::awaitable<void> AgentPool::H2Link::Run() {
  while (!waiting_.empty() && !stopping()) {
    goaway_ = false;
    if (!co_await Connect()) {
      EndAll("no connection");
      break;
    }
    nghttp2_session_callbacks* cb = nullptr;
    nghttp2_session_callbacks_new(&cb);
    nghttp2_session_callbacks_set_on_header_callback(cb, &OnHeader);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, &OnData);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, &OnClose);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, &OnFrame);
    nghttp2_session_client_new(&session_, cb, this);
    nghttp2_session_callbacks_del(cb);
    const nghttp2_settings_entry settings[] = {
        {NGHTTP2_SETTINGS_ENABLE_PUSH, 0}, {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, kH2StreamWindow}};
    nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings, 2);
    nghttp2_session_set_local_window_size(session_, NGHTTP2_FLAG_NONE, 0, kH2ConnectionWindow);
    auto waiting = std::move(waiting_);
    waiting_.clear();
    for (H2Stream* s : waiting) Submit(*s);
    Flush();
    std::string error;
    auto consume = [this, &error](std::string_view data) {
      const ssize_t used = nghttp2_session_mem_recv(
          session_, reinterpret_cast<const uint8_t*>(data.data()), data.size());
      if (used < 0) {
        error = absl::StrCat("HTTP/2: ", nghttp2_strerror(static_cast<int>(used)));
        return false;
      }
      Flush();
      return true;
    };
    const ReadEnd end = co_await ReadUntil(consume, &error);
    if (end == ReadEnd::kEof && error.empty()) error = "connection closed";
    Abort(true);
    while (writing_) co_await asio::post(shard_.ioc, asio::use_awaitable);
    EndAll(error);
    nghttp2_session_del(session_);
    session_ = nullptr;
    conn_.reset();
  }
  running_ = false;
}

void AgentPool::H2Link::Submit(H2Stream& s) {
  const std::string& host = pool_.target_.host;
  const std::string authority = absl::StrCat(host, ":", pool_.target_.port);
  const std::string auth = absl::StrCat("Bearer ", pool_.token_);
  const bool with_token = !credential_ && !pool_.token_.empty();
  auto nv = [](std::string_view n, std::string_view v) {
    return nghttp2_nv{reinterpret_cast<uint8_t*>(const_cast<char*>(n.data())),
                      reinterpret_cast<uint8_t*>(const_cast<char*>(v.data())), n.size(), v.size(),
                      NGHTTP2_NV_FLAG_NONE};
  };
  const nghttp2_nv headers[] = {
      nv(":method", "GET"),        nv(":scheme", pool_.target_.tls ? "https" : "http"),
      nv(":authority", authority), nv(":path", s.target),
      nv("accept", pool_.accept_), nv("user-agent", "kf-load/0.1"),
      nv("authorization", auth)};
  const size_t n = sizeof(headers) / sizeof(headers[0]) - (with_token ? 0 : 1);
  const int32_t id = nghttp2_submit_request(session_, nullptr, headers, n, nullptr, &s);
  if (id < 0) {
    End(s, absl::StrCat("HTTP/2 request: ", nghttp2_strerror(id)));
    return;
  }
  s.id = id;
}

void AgentPool::H2Link::Flush() {
  if (session_ == nullptr) return;
  for (;;) {
    const uint8_t* data = nullptr;
    const ssize_t n = nghttp2_session_mem_send(session_, &data);
    if (n <= 0) break;
    out_.append(reinterpret_cast<const char*>(data), static_cast<size_t>(n));
  }
  if (!out_.empty() && !writing_) {
    writing_ = true;
    asio::co_spawn(shard_.ioc, WriteOut(), asio::detached);
  }
}

asio::awaitable<void> AgentPool::H2Link::WriteOut() {
  while (!out_.empty() && conn_) {
    std::string chunk;
    chunk.swap(out_);
    const std::string error = co_await WriteAll(chunk);
    if (!error.empty()) {
      out_.clear();
      Abort(true);  // The read loop sees it and ends the connection.
      break;
    }
  }
  out_.clear();
  writing_ = false;
}

void AgentPool::H2Link::EndAll(const std::string& why) {
  auto waiting = std::move(waiting_);
  waiting_.clear();
  for (H2Stream* s : waiting) End(*s, why);
  // The open streams: nghttp2 keeps each one's H2Stream as its user data.
  if (session_ == nullptr) return;
  const uint32_t next = nghttp2_session_get_next_stream_id(session_);
  for (uint32_t id = 1; id < next && id <= 0x7fffffffu; id += 2) {
    if (H2Stream* s = StreamOf(session_, static_cast<int32_t>(id))) {
      nghttp2_session_set_stream_user_data(session_, static_cast<int32_t>(id), nullptr);
      End(*s, why);
    }
  }
}

int AgentPool::H2Link::OnHeader(nghttp2_session* session, const nghttp2_frame* frame,
                                const uint8_t* name, size_t namelen, const uint8_t* value,
                                size_t valuelen, uint8_t, void*) {
  if (frame->hd.type != NGHTTP2_HEADERS) return 0;
  H2Stream* s = StreamOf(session, frame->hd.stream_id);
  if (s == nullptr || s->status != 0) return 0;
  if (std::string_view(reinterpret_cast<const char*>(name), namelen) != ":status") return 0;
  int status = 0;
  for (size_t i = 0; i < valuelen && value[i] >= '0' && value[i] <= '9'; ++i) {
    status = status * 10 + (value[i] - '0');
  }
  s->status = status;
  if (s->on_headers) s->on_headers();
  return 0;
}

int AgentPool::H2Link::OnData(nghttp2_session* session, uint8_t, int32_t id, const uint8_t* data,
                              size_t len, void*) {
  H2Stream* s = StreamOf(session, id);
  if (s == nullptr || !s->on_data) return 0;
  if (!s->on_data(std::string_view(reinterpret_cast<const char*>(data), len))) {
    // The task has what it needs (an ERROR event, a broken stream): end it here.
    nghttp2_session_set_stream_user_data(session, id, nullptr);
    nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
    End(*s, "");
  }
  return 0;
}

int AgentPool::H2Link::OnClose(nghttp2_session* session, int32_t id, uint32_t error_code, void*) {
  H2Stream* s = StreamOf(session, id);
  if (s == nullptr) return 0;
  nghttp2_session_set_stream_user_data(session, id, nullptr);
  End(*s, error_code == NGHTTP2_NO_ERROR
              ? std::string()
              : absl::StrCat("stream reset: ", nghttp2_http2_strerror(error_code)));
  return 0;
}

int AgentPool::H2Link::OnFrame(nghttp2_session*, const nghttp2_frame* frame, void* user) {
  // GOAWAY: the open streams run to their end; new ones wait for the next connection.
  if (frame->hd.type == NGHTTP2_GOAWAY) static_cast<H2Link*>(user)->goaway_ = true;
  return 0;
}

void AgentPool::Task::AbortStream() {
  H2Stream* s = h2_stream_;
  if (s != nullptr && s->link != nullptr) s->link->Close(*s, "closed");
}

asio::awaitable<AgentPool::Task::Reply> AgentPool::Task::RequestH2(Verb verb,
                                                                   const std::string& target,
                                                                   ListScanner* scanner) {
  Count(verb);
  Reply r;
  if (stopping()) co_return r;
  H2Stream s(shard_.ioc);
  s.target = target;
  s.on_data = [scanner, &s](std::string_view body) {
    if (scanner != nullptr && s.status == 200) scanner->Feed(body);
    return true;
  };
  const auto sent = Clock::now();
  deadline_ = sent + kRequestTimeout;
  h2_stream_ = &s;
  link_->Open(s);
  co_await s.Wait();
  h2_stream_ = nullptr;
  deadline_ = Clock::time_point::max();
  if (stopping()) co_return r;
  if (s.status == 0 || !s.error.empty()) {
    r.error = s.error.empty() ? "no response" : s.error;
    CountError();
    pool_.NoteFailure(absl::StrCat(ToAbsl(target), ": ", r.error));
    co_return r;
  }
  r.status = s.status;
  RecordLatency(verb, sent);
  CountStatus(r.status);
  co_return r;
}

// One LIST+WATCH stream, as a client-go reflector runs it.
class AgentPool::Reflector : public AgentPool::Task {
 public:
  Reflector(Shard& shard, Kind kind, int32_t key, std::string path, std::string field_selector,
            std::string label_selector)
      : Task(shard),
        record_(kind, key),
        path_(std::move(path)),
        field_(std::move(field_selector)),
        label_(std::move(label_selector)) {}

  asio::awaitable<void> Run() override;
  const StreamRecord& record() const { return record_; }

 private:
  enum class End { kClean, kExpired, kError, kStopped };
  struct WatchState {
    int64_t now = 0;  // Receipt time of the bytes being parsed.
    bool open = false;
    std::optional<int> error_code;  // From an ERROR event.
  };

  // The list's resourceVersion; nullopt on failure. `consistent`: no resourceVersion (a quorum
  // read, paginated), as client-go relists after a 410.
  asio::awaitable<std::optional<uint64_t>> List(bool consistent);
  asio::awaitable<End> Watch(uint64_t rv);
  asio::awaitable<End> WatchH2(const std::string& target, int timeout_s);
  // The watch's end from its status, its ERROR event, and whether it ended cleanly.
  End Conclude(int status, const WatchState& st, bool done, const std::string& broken);
  // False once the stream ended (cleanly or not).
  bool Feed(tools::EventStreamParser& parser, WatchState& st, std::string_view data);
  void OnLine(std::string_view line, WatchState& st);
  void FirstListDone() {
    if (first_list_done_) return;
    first_list_done_ = true;
    pool_.pending_first_lists_.fetch_sub(1, std::memory_order_relaxed);
  }
  Clock::duration NextBackoff() { return BackoffDelay(attempt_++, shard_.Uniform()); }

  StreamRecord record_;
  const std::string path_, field_, label_;
  int attempt_ = 0;
  bool first_list_done_ = false;
};

asio::awaitable<void> AgentPool::Reflector::Run() {
  bool need_list = true, after_410 = false;
  while (!stopping()) {
    if (need_list) {
      const std::optional<uint64_t> rv = co_await List(after_410);
      FirstListDone();
      if (stopping()) break;
      if (!rv) {
        if (!co_await Sleep(NextBackoff())) break;
        continue;
      }
      record_.OnList(*rv, after_410);
      need_list = after_410 = false;
    }
    const auto started = Clock::now();
    const End end = co_await Watch(record_.resume_rv());
    if (end == End::kStopped || stopping()) break;
    ++shard_.watch_ends;
    if (end == End::kExpired) {
      need_list = after_410 = true;
      Bump(shard_.relists);
      continue;
    }
    if (end == End::kClean && Clock::now() - started >= kShortWatch) continue;
    if (!co_await Sleep(NextBackoff())) break;
  }
  conn_.reset();
  FirstListDone();
}

asio::awaitable<std::optional<uint64_t>> AgentPool::Reflector::List(bool consistent) {
  std::optional<uint64_t> rv;
  std::string token;
  for (int page = 0; page < kMaxListPages; ++page) {
    std::vector<std::pair<std::string_view, std::string>> params;
    params.emplace_back("fieldSelector", field_);
    params.emplace_back("labelSelector", label_);
    params.emplace_back("limit", "500");
    if (!token.empty()) {
      params.emplace_back("continue", token);
    } else if (!consistent) {
      params.emplace_back("resourceVersion", "0");
    }
    ListScanner scanner;
    scanner.set_protobuf(pool_.options_.protobuf);
    const std::string target = absl::StrCat(path_, Query(std::move(params)));
    const Reply r = co_await Request(kList, target, &scanner);
    scanner.Finish();
    if (r.status != 200) {
      if (r.status != 0) {
        pool_.NoteFailure(absl::StrCat("LIST ", path_, " ", field_, label_, ": HTTP ", r.status));
      }
      co_return std::nullopt;
    }
    const std::optional<uint64_t> page_rv = tools::ParseResourceVersion(scanner.resource_version());
    if (!scanner.done() || scanner.failed() || !page_rv) {
      pool_.NoteFailure(absl::StrCat("LIST ", path_, ": no resourceVersion in the body"));
      conn_.reset();
      co_return std::nullopt;
    }
    if (!rv) rv = page_rv;  // Every page is of the first page's snapshot.
    token = scanner.continue_token();
    if (token.empty()) co_return rv;
  }
  co_return std::nullopt;
}

asio::awaitable<AgentPool::Reflector::End> AgentPool::Reflector::Watch(uint64_t rv) {
  const int timeout_s = 300 + static_cast<int>(shard_.rng() % 300);
  std::vector<std::pair<std::string_view, std::string>> params;
  params.emplace_back("allowWatchBookmarks", "true");
  params.emplace_back("fieldSelector", field_);
  params.emplace_back("labelSelector", label_);
  params.emplace_back("resourceVersion", std::to_string(rv));
  params.emplace_back("timeoutSeconds", std::to_string(timeout_s));
  params.emplace_back("watch", "true");
  const std::string target = absl::StrCat(path_, Query(std::move(params)));
  if (link_ != nullptr) {
    const End end = co_await WatchH2(target, timeout_s);
    co_return end;
  }
  Count(kWatch);
  if (!conn_ && !co_await Connect()) {
    if (stopping()) co_return End::kStopped;
    CountError();
    co_return End::kError;
  }
  deadline_ = Clock::now() + seconds(timeout_s) + kWatchGrace;
  // Named, not temporaries in the co_await expressions: GCC 12 is unreliable with those.
  const std::string request = RequestText(target);
  const std::string write_error = co_await WriteAll(request);
  tools::EventStreamParser parser;
  parser.set_protobuf(pool_.options_.protobuf);
  WatchState st;
  std::string read_error;
  if (write_error.empty()) {
    auto consume = [this, &parser, &st](std::string_view data) {
      st.now = tools::UnixNanos();  // One receipt time per read.
      return Feed(parser, st, data);
    };
    co_await ReadUntil(consume, &read_error);
  }
  deadline_ = Clock::time_point::max();
  conn_.reset();  // Each watch has its own connection; the next one starts afresh.
  if (st.open) pool_.open_watches_.fetch_sub(1, std::memory_order_relaxed);
  if (stopping()) co_return End::kStopped;
  if (!parser.head_done() ||
      (parser.state() == tools::EventStreamParser::State::kError && parser.status() == 0)) {
    CountError();
    pool_.NoteFailure(absl::StrCat(
        "WATCH ", path_, ": no response: ", write_error.empty() ? read_error : write_error));
    co_return End::kError;
  }
  const bool done = parser.state() == tools::EventStreamParser::State::kDone;
  co_return Conclude(
      parser.status(), st, done,
      parser.state() == tools::EventStreamParser::State::kError ? parser.error() : read_error);
}

AgentPool::Reflector::End AgentPool::Reflector::Conclude(int status, const WatchState& st,
                                                         bool done, const std::string& broken) {
  if (status != 200) {
    CountStatus(status);
    if (status == 410) return End::kExpired;
    pool_.NoteFailure(absl::StrCat("WATCH ", path_, ": HTTP ", status));
    return End::kError;
  }
  if (st.error_code) {
    if (*st.error_code == 410) return End::kExpired;
    pool_.NoteFailure(absl::StrCat("WATCH ", path_, ": ERROR event, code ", *st.error_code));
    return End::kError;
  }
  if (done) return End::kClean;
  pool_.NoteFailure(absl::StrCat("WATCH ", path_, " broken off: ", broken));
  return End::kError;  // Broken off mid-stream (or by its deadline).
}

asio::awaitable<AgentPool::Reflector::End> AgentPool::Reflector::WatchH2(const std::string& target,
                                                                         int timeout_s) {
  Count(kWatch);
  if (stopping()) co_return End::kStopped;
  tools::EventStreamParser parser;
  parser.set_protobuf(pool_.options_.protobuf);
  WatchState st;
  H2Stream s(shard_.ioc);
  s.target = target;
  s.on_headers = [this, &s, &parser, &st] {
    if (s.status != 200) return;
    parser.StartBody();  // HTTP/2 frames the body: DATA is the event stream itself.
    st.open = true;
    attempt_ = 0;
    CountStatus(200);
    pool_.open_watches_.fetch_add(1, std::memory_order_relaxed);
  };
  s.on_data = [this, &s, &parser, &st](std::string_view data) {
    if (s.status != 200) return true;
    st.now = tools::UnixNanos();
    return Feed(parser, st, data);
  };
  deadline_ = Clock::now() + seconds(timeout_s) + kWatchGrace;
  h2_stream_ = &s;
  link_->Open(s);
  co_await s.Wait();
  h2_stream_ = nullptr;
  deadline_ = Clock::time_point::max();
  if (st.open) pool_.open_watches_.fetch_sub(1, std::memory_order_relaxed);
  if (stopping()) co_return End::kStopped;
  if (s.status == 0) {
    CountError();
    pool_.NoteFailure(absl::StrCat("WATCH ", path_, ": no response: ", s.error));
    co_return End::kError;
  }
  // Ended by the server (END_STREAM), unless the stream was reset or its events were broken.
  // A 200 was counted in on_headers; Conclude counts the others.
  const bool broken = parser.state() == tools::EventStreamParser::State::kError;
  co_return Conclude(s.status, st, s.error.empty() && !broken, broken ? parser.error() : s.error);
}

bool AgentPool::Reflector::Feed(tools::EventStreamParser& parser, WatchState& st,
                                std::string_view data) {
  Bump(shard_.watch_bytes, data.size());
  const bool more = parser.Feed(data, [&](std::string_view line) { OnLine(line, st); });
  if (!st.open && parser.head_done() && parser.status() == 200) {
    st.open = true;
    attempt_ = 0;  // The server answered: the next failure starts the backoff afresh.
    CountStatus(200);
    pool_.open_watches_.fetch_add(1, std::memory_order_relaxed);
  }
  return more && !st.error_code;
}

void AgentPool::Reflector::OnLine(std::string_view line, WatchState& st) {
  if (st.error_code) return;  // Nothing after an ERROR counts.
  const char type = tools::EventFields::TypeLetter(line);
  if (type == 'E') {
    st.error_code = EventErrorCode(line).value_or(0);
    return;
  }
  const std::optional<uint64_t> rv = EventResourceVersion(line);
  if (type == 'B') {
    Bump(shard_.bookmarks);
    if (rv) record_.OnBookmark(*rv);
    return;
  }
  if (type != 'A' && type != 'M' && type != 'D') {
    pool_.NoteFailure(absl::StrCat("not a watch event: ", ToAbsl(line.substr(0, 120))));
    return;
  }
  Bump(shard_.events);
  if (!rv) {
    pool_.NoteFailure(absl::StrCat("event without resourceVersion: ", ToAbsl(line.substr(0, 120))));
    return;
  }
  record_.OnEvent(*rv);
  const std::optional<int64_t> written = tools::EventFields::Annotation(line, shard_.stamp_key);
  if (written && *written >= pool_.options_.measure_from_unix_ns) {
    shard_.latency[static_cast<size_t>(record_.kind())].RecordNanos(st.now - *written);
  }
}

// A log shipper's metadata lookups: one pod by name, then the namespace's (or one node's) pods,
// every interval.
class AgentPool::Poller : public AgentPool::Task {
 public:
  explicit Poller(Shard& shard) : Task(shard) {}
  asio::awaitable<void> Run() override;
};

asio::awaitable<void> AgentPool::Poller::Run() {
  const auto interval = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(pool_.options_.poll_interval_s));
  const std::string ns_pods =
      absl::StrCat("/api/v1/namespaces/", pool_.options_.namespace_, "/pods");
  if (!co_await Sleep(std::chrono::duration_cast<Clock::duration>(interval * shard_.Uniform()))) {
    co_return;
  }
  auto next = Clock::now();
  while (!stopping()) {
    next += interval;
    if (pool_.options_.pods > 0) {
      const uint64_t pod = shard_.rng() % static_cast<uint64_t>(pool_.options_.pods);
      const std::string target = absl::StrCat(ns_pods, "/load-pod-", pod);
      co_await Request(kGet, target, nullptr);
      if (stopping()) break;
    }
    if (pool_.options_.poller_list_nodes > 0) {
      const uint64_t node = shard_.rng() % static_cast<uint64_t>(pool_.options_.poller_list_nodes);
      co_await Request(kList, absl::StrCat(ns_pods, "?fieldSelector=spec.nodeName%3Dnode-", node),
                       nullptr);
    } else {
      co_await Request(kList, ns_pods, nullptr);
    }
    const auto now = Clock::now();
    if (now > next) next = now;  // Overran: the next round starts now, none is made up.
    if (!co_await Sleep(next - now)) break;
  }
  conn_.reset();
}

const tcp::endpoint& AgentPool::NextAddress() {
  const size_t n = addresses_.size();
  const uint64_t first = next_address_.fetch_add(1, std::memory_order_relaxed);
  const ReadinessProbe* ready = options_.readiness;
  for (size_t k = 0; ready != nullptr && k < n; ++k) {
    if (ready->Ready((first + k) % n)) return addresses_[(first + k) % n];
  }
  // None ready: as kube-proxy falls back to terminating endpoints still serving, one that
  // answers at all; else (or not asked) the next in turn.
  for (size_t k = 0; ready != nullptr && k < n; ++k) {
    if (ready->Alive((first + k) % n)) return addresses_[(first + k) % n];
  }
  return addresses_[first % n];
}

AgentPool::AgentPool(tools::Endpoint target, std::string token, AgentOptions options)
    : target_(std::move(target)), token_(std::move(token)), options_(std::move(options)) {}

AgentPool::~AgentPool() {
  for (auto& s : shards_) {
    s->guard.reset();
    s->ioc.stop();
    if (s->thread.joinable()) s->thread.join();
  }
}

absl::Status AgentPool::Start() {
  boost::system::error_code ec;
  asio::io_context resolver_ioc;
  tcp::resolver resolver(resolver_ioc);
  std::vector<std::string> ports{target_.port};
  ports.insert(ports.end(), options_.more_ports.begin(), options_.more_ports.end());
  for (const std::string& port : ports) {
    auto results = resolver.resolve(target_.host, port, ec);
    if (ec || results.empty()) {
      return absl::UnavailableError(
          absl::StrCat("resolve ", target_.host, ":", port, ": ", ec.message()));
    }
    addresses_.push_back(results.begin()->endpoint());
    if (options_.source_ips > 1 &&
        !(addresses_.back().address().is_v4() && addresses_.back().address().is_loopback())) {
      return absl::InvalidArgumentError("--source-ips needs an IPv4 loopback target");
    }
  }
  if (target_.tls) {
    ssl_.emplace(asio::ssl::context::tls_client);
    if (target_.ca_file.empty()) {
      ssl_->set_default_verify_paths(ec);
    } else {
      ssl_->load_verify_file(target_.ca_file, ec);
    }
    if (ec) return absl::InvalidArgumentError(absl::StrCat("CA file: ", ec.message()));
    ssl_->set_verify_mode(asio::ssl::verify_peer);
    // Idle watches give their TLS record buffers back to the allocator; a server closing
    // without close_notify is an end of stream, not an error.
    SSL_CTX_set_mode(ssl_->native_handle(), SSL_MODE_RELEASE_BUFFERS);
    SSL_CTX_set_options(ssl_->native_handle(), SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_TICKET);
    SSL_CTX_set_session_cache_mode(ssl_->native_handle(), SSL_SESS_CACHE_OFF);
  }
  accept_ = options_.protobuf ? "application/vnd.kubernetes.protobuf,application/json"
                              : "application/json";
  const std::string common =
      absl::StrCat("Host: ", target_.host, ":", target_.port, "\r\nAccept: ", accept_,
                   "\r\nUser-Agent: kf-load/0.1\r\n");
  request_headers_ = absl::StrCat(
      common, token_.empty() ? "" : absl::StrCat("Authorization: Bearer ", token_, "\r\n"), "\r\n");
  certificate_headers_ = absl::StrCat(common, "\r\n");
  if (!options_.node_ca_cert_file.empty()) {
    if (!target_.tls) return absl::InvalidArgumentError("node certificates need an https target");
    auto certs = NodeCertificates::Load(options_.node_ca_cert_file, options_.node_ca_key_file);
    if (!certs.ok()) return certs.status();
    node_certs_ = *std::move(certs);
  }
  for (int i = 0; i < std::max(1, options_.threads); ++i) {
    shards_.push_back(std::make_unique<Shard>(*this, uint64_t{options_.seed} * 7919 + i));
  }
  for (auto& s : shards_) {
    Shard* shard = s.get();
    shard->guard.emplace(shard->ioc.get_executor());
    Sweep(*shard);
    shard->thread = std::thread([shard] {
      shard->ioc.run();
      shard->finished = true;
    });
  }
  return absl::OkStatus();
}

void AgentPool::Sweep(Shard& shard) {
  // Once a second: close connections past their deadline (a connect, a request or a watch that
  // overran); the coroutine waiting on it sees the error and retries.
  shard.sweeper.expires_after(seconds(1));
  shard.sweeper.async_wait([this, &shard](boost::system::error_code ec) {
    if (ec || shard.stopping) return;
    const auto now = Clock::now();
    for (auto& task : shard.tasks) {
      if (task->Overdue(now)) {
        ++shard.timeouts;
        task->Abort(false);
      }
    }
    Sweep(shard);
  });
}

void AgentPool::StartAgent(AgentType type, int index) {
  const uint64_t n = agents_.fetch_add(1, std::memory_order_relaxed);
  Shard& shard = *shards_[n % shards_.size()];
  // Counted here, before the shard gets to it, so no one sees the agent started and not pending.
  const uint64_t reflectors =
      type == AgentType::kKubelet
          ? 2 + static_cast<uint64_t>(std::max(0, options_.configmaps_per_kubelet))
          : (type == AgentType::kKubeProxy ? 2 : (type == AgentType::kReference ? 3 : 0));
  pending_first_lists_.fetch_add(reflectors, std::memory_order_relaxed);
  streams_.fetch_add(reflectors, std::memory_order_relaxed);
  // The agent's objects are made on its shard's thread, which alone touches them after.
  asio::post(shard.ioc, [this, &shard, type, index] {
    std::vector<std::unique_ptr<Task>> tasks;
    const std::string& ns = options_.namespace_;
    std::shared_ptr<const NodeCredential> credential;
    if (type == AgentType::kKubelet && node_certs_) {
      auto issued = node_certs_->Issue(absl::StrCat("node-", index));
      if (issued.ok()) {
        credential = *std::move(issued);
      } else {
        NoteFailure(absl::StrCat("node certificate: ", issued.status().message()));
      }
    }
    if (type == AgentType::kKubelet) {
      const std::string node = absl::StrCat("node-", index);
      tasks.push_back(std::make_unique<Reflector>(shard, Kind::kPods, index, "/api/v1/pods",
                                                  absl::StrCat("spec.nodeName=", node), ""));
      tasks.push_back(std::make_unique<Reflector>(shard, Kind::kNodes, index, "/api/v1/nodes",
                                                  absl::StrCat("metadata.name=", node), ""));
      for (int k = 0; k < options_.configmaps_per_kubelet; ++k) {
        tasks.push_back(std::make_unique<Reflector>(
            shard, Kind::kConfigMaps, k, absl::StrCat("/api/v1/namespaces/", ns, "/configmaps"),
            absl::StrCat("metadata.name=lcm-", k), ""));
      }
    } else if (type == AgentType::kKubeProxy) {
      tasks.push_back(std::make_unique<Reflector>(
          shard, Kind::kEndpointSlices, -1, "/apis/discovery.k8s.io/v1/endpointslices", "",
          "!service.kubernetes.io/headless,!service.kubernetes.io/service-proxy-name"));
      tasks.push_back(std::make_unique<Reflector>(shard, Kind::kServices, -1, "/api/v1/services",
                                                  "", "!service.kubernetes.io/service-proxy-name"));
    } else if (type == AgentType::kReference) {
      tasks.push_back(std::make_unique<Reflector>(shard, Kind::kPods, -1, "/api/v1/pods", "", ""));
      tasks.push_back(
          std::make_unique<Reflector>(shard, Kind::kNodes, -1, "/api/v1/nodes", "", ""));
      tasks.push_back(std::make_unique<Reflector>(
          shard, Kind::kEndpointSlices, -1, "/apis/discovery.k8s.io/v1/endpointslices", "", ""));
    } else {
      tasks.push_back(std::make_unique<Poller>(shard));
    }
    H2Link* link = nullptr;
    if (options_.http2 && type != AgentType::kPoller) {
      auto owned = std::make_unique<H2Link>(shard);
      link = owned.get();
      if (credential) link->SetCredential(credential);
      shard.tasks.push_back(std::move(owned));  // Swept and stopped with the others; not run.
    }
    for (auto& task : tasks) {
      if (credential) task->SetCredential(credential);
      if (link != nullptr) task->SetLink(link);
      Task* t = task.get();
      shard.tasks.push_back(std::move(task));
      if (shard.stopping) {
        // Never runs: its first LIST will not come.
        if (dynamic_cast<Reflector*>(t) != nullptr) {
          pending_first_lists_.fetch_sub(1, std::memory_order_relaxed);
        }
        continue;
      }
      asio::co_spawn(shard.ioc, t->Run(), [this](std::exception_ptr e) {
        if (!e) return;
        try {
          std::rethrow_exception(e);
        } catch (const std::exception& ex) {
          NoteFailure(absl::StrCat("agent stopped by an exception: ", ex.what()));
        }
      });
    }
  });
}

AgentProgress AgentPool::Progress() const {
  AgentProgress p;
  p.agents = agents_.load(std::memory_order_relaxed);
  p.streams = streams_.load(std::memory_order_relaxed);
  p.open_connections = open_connections_.load(std::memory_order_relaxed);
  p.peak_connections = peak_connections_.load(std::memory_order_relaxed);
  p.failed_connections = failed_connections_.load(std::memory_order_relaxed);
  p.open_watches = open_watches_.load(std::memory_order_relaxed);
  p.pending_first_lists = pending_first_lists_.load(std::memory_order_relaxed);
  for (const auto& s : shards_) {
    p.events += Get(s->events);
    p.bookmarks += Get(s->bookmarks);
    p.watch_bytes += Get(s->watch_bytes);
    p.relists += Get(s->relists);
    p.requests += Get(s->requests);
    p.errors += Get(s->failed_requests);
  }
  return p;
}

void AgentPool::Stop(std::chrono::seconds limit) {
  for (auto& s : shards_) {
    Shard* shard = s.get();
    asio::post(shard->ioc, [shard] {
      shard->stopping = true;
      shard->sweeper.cancel();
      for (auto& task : shard->tasks) task->Cancel();
      shard->guard.reset();
    });
  }
  const auto deadline = Clock::now() + limit;
  for (auto& s : shards_) {
    while (!s->finished && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (!s->finished) NoteFailure("agent thread still busy at the stop deadline; stopped");
    s->ioc.stop();
    if (s->thread.joinable()) s->thread.join();
  }
}

std::vector<const StreamRecord*> AgentPool::Streams() const {
  std::vector<const StreamRecord*> out;
  for (const auto& s : shards_) {
    for (const auto& task : s->tasks) {
      if (const auto* r = dynamic_cast<const Reflector*>(task.get())) out.push_back(&r->record());
    }
  }
  return out;
}

AgentResults AgentPool::GetResults() const {
  AgentResults r;
  for (const auto& s : shards_) {
    for (int k = 0; k < kKinds; ++k) {
      r.latency[static_cast<size_t>(k)].Merge(s->latency[static_cast<size_t>(k)]);
    }
    r.list_latency.Merge(s->list_latency);
    r.get_latency.Merge(s->get_latency);
    for (int v = 0; v < kVerbs; ++v) r.by_verb[static_cast<size_t>(v)] += Get(s->by_verb[v]);
    for (const auto& [status, n] : s->by_status) r.by_status[status] += n;
    r.errors += s->errors;
    r.timeouts += s->timeouts;
    r.watch_ends += s->watch_ends;
  }
  return r;
}

void AgentPool::NoteFailure(const std::string& message) {
  // Failures come in floods when a server struggles: thousands of one kind, a few others.
  std::string kind;
  kind.reserve(std::min<size_t>(message.size(), 160));
  for (size_t i = 0; i < message.size() && kind.size() < 160; ++i) {
    const bool digit = message[i] >= '0' && message[i] <= '9';
    if (!digit) {
      kind.push_back(message[i]);
    } else if (kind.empty() || kind.back() != '#') {
      kind.push_back('#');
    }
  }
  std::lock_guard lock(failures_mu_);
  auto it = failures_.find(kind);
  if (it == failures_.end()) {
    if (failures_.size() >= kMaxFailureKinds) {
      ++other_failures_;
      return;
    }
    it = failures_.emplace(std::move(kind), FailureKind{0, message.substr(0, 300)}).first;
  }
  ++it->second.count;
}

std::vector<std::string> AgentPool::FailureSamples() const {
  std::lock_guard lock(failures_mu_);
  std::vector<std::pair<uint64_t, const std::string*>> kinds;
  for (const auto& [kind, f] : failures_) kinds.emplace_back(f.count, &f.example);
  std::sort(kinds.begin(), kinds.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::string> out;
  for (const auto& [count, example] : kinds) out.push_back(absl::StrCat(count, "x ", *example));
  if (other_failures_ > 0) out.push_back(absl::StrCat(other_failures_, "x of other kinds"));
  return out;
}

}  // namespace kf::load
