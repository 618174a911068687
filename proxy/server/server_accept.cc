// The accept loops (Server::AcceptLoop): each listener's clients spread over the workers (the one
// with the fewest connections), refused near the descriptor limit, paused while every worker's
// TLS handshakes are behind (Server::TlsListenerFull, counted and logged); each session is made
// on its worker's thread.
#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "absl/strings/str_cat.h"
#include "common/use_nothrow.h"
#include "proxy/edge/http2_session.h"
#include "proxy/edge/http_session.h"
#include "proxy/server/server.h"

namespace kf {

namespace {

template <class Socket>
std::string RemoteOf(const Socket& socket) {
  beast::error_code ec;
  auto ep = socket.remote_endpoint(ec);
  if (ec) return "unknown";
  const auto addr = ep.address();
  return addr.is_v6() ? absl::StrCat("[", addr.to_string(), "]:", ep.port())
                      : absl::StrCat(addr.to_string(), ":", ep.port());
}

}  // namespace

Worker& Server::NextWorker() {
  // The worker with the fewest connections: watches live long, so accept order alone can pile
  // one kind of watcher onto one thread.
  Worker* best = workers_[0].get();
  for (size_t i = 1; i < session_workers_; ++i) {
    if (workers_[i]->sessions().connections() < best->sessions().connections()) {
      best = workers_[i].get();
    }
  }
  best->sessions().AddConnection();
  return *best;
}

asio::awaitable<void> Server::AcceptLoop(asio::ip::tcp::acceptor& acceptor, bool tls,
                                         Pipeline* only) {
  asio::steady_timer backoff(main_ioc_);
  while (acceptor.is_open()) {
    if (tls && TlsListenerFull()) {
      // Let the kernel hold the next clients for a moment (its listen queue costs this process
      // nothing).
      backoff.expires_after(std::chrono::milliseconds(20));
      co_await backoff.async_wait(use_nothrow);
      continue;
    }
    Worker& worker = only != nullptr ? *workers_[0] : NextWorker();
    if (only != nullptr) worker.sessions().AddConnection();
    auto [ec, socket] = co_await acceptor.async_accept(worker.ioc(), use_nothrow);
    if (ec == asio::error::operation_aborted || !acceptor.is_open()) co_return;
    if (ec) {
      // Out of descriptors and the like: say so, pause briefly, keep serving.
      worker.sessions().RemoveConnection();
      connections_refused_[1].fetch_add(1, std::memory_order_relaxed);
      log_.Warning("accept failed", {{"error", ec.message()}});
      backoff.expires_after(std::chrono::milliseconds(100));
      co_await backoff.async_wait(use_nothrow);
      continue;
    }
    if (RefusedNearFdLimit(socket, worker)) continue;
    beast::error_code ignored;
    socket.set_option(asio::ip::tcp::no_delay(true), ignored);
    std::string remote = RemoteOf(socket);  // NOLINT
    const auto accepted = std::chrono::steady_clock::now();
    if (tls) worker.handshakes_pending().fetch_add(1, std::memory_order_relaxed);
    // The session is created on its worker's thread, where it will live.
    Pipeline& pipeline =
        only != nullptr ? *only : (tls ? worker.tls_pipeline() : worker.pipeline());
    asio::post(worker.ioc(), [this, &worker, &pipeline, tls, accepted, remote = std::move(remote),
                              socket = std::move(socket)]() mutable {
      StartSession(worker, pipeline, tls, accepted, std::move(remote), std::move(socket));
    });
  }
}

// Descriptors are handed out lowest first, so this one's number is a floor on those open:
// past the headroom, refuse the connection at once (existing ones keep theirs, and the
// upstream connections they need) rather than run out mid-request.
bool Server::RefusedNearFdLimit(AcceptedSocket& socket, Worker& worker) {
  if (socket.native_handle() < fd_refuse_at_) return false;
  worker.sessions().RemoveConnection();
  beast::error_code ignored;
  socket.close(ignored);
  if (connections_refused_[0].fetch_add(1, std::memory_order_relaxed) % 1000 == 0) {
    log_.Warning("file descriptors nearly exhausted; refusing new connections",
                 {{"open_fds_at_least", static_cast<int64_t>(fd_refuse_at_)},
                  {"refused_so_far", static_cast<int64_t>(connections_refused_[0].load())}});
  }
  return true;
}

void Server::StartSession(Worker& worker, Pipeline& pipeline, bool tls,
                          std::chrono::steady_clock::time_point accepted, std::string remote,
                          AcceptedSocket socket) {
  beast::tcp_stream tcp(std::move(socket));
  auto stream = tls ? std::make_unique<AnyStream>(std::make_unique<TlsServerStream>(
                          std::move(tcp), server_tls_->native_handle()))
                    : std::make_unique<AnyStream>(std::move(tcp));
  auto session = std::make_shared<HttpSession>(std::move(stream), std::move(remote), pipeline,
                                               worker.sessions(), active_sessions_, log_);
  if (shutting_down_) {  // The session's end uncounts the connection.
    if (tls) worker.handshakes_pending().fetch_sub(1, std::memory_order_relaxed);
    return;
  }
  session->SetHttp2Limits(h2_limits_);
  if (tls) {
    session->SetHandshakeGate(accepted, Worker::kHandshakeQueueWait, &worker.handshakes_pending());
  }
  session->Start(worker.ioc().get_executor());
}

SharedHttp2Limits Server::MakeHttp2Limits(const ProxyOptions& options) {
  Http2Limits h2;
  if (options.http2_max_streams_per_connection > 0) {
    h2.max_concurrent_streams = options.http2_max_streams_per_connection;
  }
  h2.header_block_timeout = absl::ToChronoMilliseconds(options.http2_header_block_timeout);
  h2.request_timeout = absl::ToChronoMilliseconds(options.request_timeout);
  h2.max_continuations = options.http2_max_continuations;
  h2.max_header_bytes_per_connection = options.http2_max_header_bytes_per_connection;
  h2.stream_reset_burst = options.http2_stream_reset_burst;
  h2.stream_reset_rate = options.http2_stream_reset_rate;
  h2.frame_buffer_quiet = absl::ToChronoMilliseconds(options.http2_frame_buffer_release_after);
  return std::make_shared<const Http2Limits>(std::move(h2));
}

bool Server::TlsListenerFull() {
  const bool full = std::all_of(
      workers_.begin(), workers_.begin() + static_cast<std::ptrdiff_t>(session_workers_),
      [](const std::unique_ptr<Worker>& w) {
        return w->handshakes_pending().load() >= Worker::kMaxHandshakesPending;
      });
  if (!full) return false;
  const uint64_t pauses = accept_paused_.fetch_add(1, std::memory_order_relaxed) + 1;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_pause_log_ >= std::chrono::seconds(10)) {
    last_pause_log_ = now;
    log_.Warning("TLS handshakes behind: new connections wait in the listen queue",
                 {{"handshakes_waiting_per_thread", Worker::kMaxHandshakesPending},
                  {"accept_pauses_so_far", static_cast<int64_t>(pauses)}});
  }
  return true;
}

}  // namespace kf
