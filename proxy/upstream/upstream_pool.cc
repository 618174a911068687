#include "proxy/upstream/upstream_pool.h"

#include <openssl/ssl.h>
#include <sys/socket.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cerrno>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/use_nothrow.h"
#include "proxy/edge/http2_session.h"
#include "proxy/edge/x509_cache.h"

namespace kf {
namespace {

constexpr size_t kMaxIdlePerEndpoint = 64;
// Go's http.Server closes idle keep-alive connections after its IdleTimeout; reusing one close to
// that edge races its close, so idle connections are retired well before.
constexpr auto kMaxIdleAge = std::chrono::seconds(30);
constexpr unsigned char kAlpnHttp2[] = {2, 'h', '2', 8, 'h', 't', 't', 'p', '/', '1', '.', '1'};

bool IsIpLiteral(const std::string& host) {
  beast::error_code ec;
  asio::ip::make_address(host, ec);
  return !ec;
}

// Whether the upstream is done with an idle connection: a look at the socket without waiting
// or taking anything. An open idle connection has nothing to read; the end of the stream (the
// upstream closed it), an error (it reset it) or bytes nobody asked for (a TLS close_notify, an
// HTTP 408 before closing) all mean a request must not be written to it.
bool ClosedWhileIdle(AnyStream& stream) {
  char byte = 0;
  const int fd = stream.tcp().socket().native_handle();
  for (;;) {
    const ssize_t n = ::recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n >= 0) return true;
    if (errno == EINTR) continue;
    return errno != EAGAIN && errno != EWOULDBLOCK;
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<asio::ssl::context>> MakePassthroughTlsContext(
    const UpstreamConfig& config) {
  auto ctx = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_client);
  ctx->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                   asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                   asio::ssl::context::no_tlsv1_1);
  beast::error_code ec;
  if (config.insecure_skip_tls_verify) {
    ctx->set_verify_mode(asio::ssl::verify_none);
    return ctx;
  }
  if (!config.ca_pem.empty()) {
    ctx->add_certificate_authority(asio::buffer(config.ca_pem), ec);
    if (ec) return absl::InvalidArgumentError(absl::StrCat("upstream CA: ", ec.message()));
  } else {
    ctx->set_default_verify_paths(ec);
    if (ec) return absl::InternalError(absl::StrCat("system CA roots: ", ec.message()));
  }
  // Every worker's upstream handshakes verify against these CAs.
  CacheCertificateExtensions(SSL_CTX_get_cert_store(ctx->native_handle()));
  ctx->set_verify_mode(asio::ssl::verify_peer);
  return ctx;
}

absl::StatusOr<std::unique_ptr<asio::ssl::context>> MakeOwnTlsContext(
    const UpstreamConfig& config) {
  auto ctx = MakePassthroughTlsContext(config);
  if (!ctx.ok() || config.client_cert_pem.empty()) return ctx;
  beast::error_code ec;
  (*ctx)->use_certificate_chain(asio::buffer(config.client_cert_pem), ec);
  if (!ec)
    (*ctx)->use_private_key(asio::buffer(config.client_key_pem), asio::ssl::context::pem, ec);
  if (ec) return absl::InvalidArgumentError(absl::StrCat("client certificate: ", ec.message()));
  return ctx;
}

UpstreamPool::UpstreamPool(asio::io_context& ioc, const UpstreamConfig& config,
                           asio::ssl::context& tls, std::chrono::milliseconds dial_timeout,
                           UpstreamPoolStats* stats, bool http2)
    : ioc_(ioc),
      config_(config),
      tls_(tls),
      dial_timeout_(dial_timeout),
      stats_(stats),
      idle_(config.endpoints.size()),
      http2_(http2),
      http1_only_(config.endpoints.size(), false) {}

asio::awaitable<absl::StatusOr<UpstreamPool::Lease>> UpstreamPool::Acquire(
    bool allow_reuse, std::chrono::steady_clock::time_point deadline) {
  const size_t n = config_.endpoints.size();
  if (allow_reuse) {
    auto& idle = idle_[preferred_];
    const auto now = std::chrono::steady_clock::now();
    while (!idle.empty()) {
      Idle entry = std::move(idle.back());
      idle.pop_back();
      if (now - entry.since >= kMaxIdleAge) continue;
      if (ClosedWhileIdle(*entry.stream)) {
        if (stats_ != nullptr) stats_->stale_idle.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      co_return Lease{std::move(entry.stream), preferred_, true};
    }
  }
  absl::Status last = absl::UnavailableError("no upstream endpoints configured");
  const size_t first = preferred_;
  for (size_t attempt = 0; attempt < n; ++attempt) {
    // A call past its deadline dials nothing more (and leaves the untried endpoint first).
    if (attempt > 0 && std::chrono::steady_clock::now() >= deadline) break;
    const size_t i = (first + attempt) % n;
    // Until this dial succeeds the next call starts with the next endpoint: a call whose
    // deadline ended in this one's dial (an endpoint that swallows connections; the call may be
    // ended from outside, never coming back here) does not leave every later call to it too.
    preferred_ = (i + 1) % n;
    auto stream = co_await Dial(config_.endpoints[i], /*offer_http2=*/false, deadline);
    if (stream.ok()) {
      preferred_ = i;
      co_return Lease{*std::move(stream), i, false};
    }
    last = stream.status();
  }
  co_return last;
}

void UpstreamPool::Release(Lease lease) {
  auto& idle = idle_[lease.endpoint];
  if (idle.size() >= kMaxIdlePerEndpoint) return;  // Dropping the lease closes the connection.
  idle.push_back(Idle{std::move(lease.stream), std::chrono::steady_clock::now()});
}

void UpstreamPool::PruneHttp2() {
  const auto now = std::chrono::steady_clock::now();
  std::erase_if(h2_, [now](const std::shared_ptr<Http2Upstream>& c) {
    if (!c->ended() && c->open_streams() == 0 && now - c->idle_since() >= kMaxIdleAge) c->Close();
    return c->ended();
  });
}

void UpstreamPool::CloseHttp2() {
  for (const auto& c : h2_) c->Close();
  h2_.clear();
}

asio::awaitable<absl::StatusOr<std::shared_ptr<Http2Upstream>>> UpstreamPool::AcquireHttp2() {
  for (;;) {
    PruneHttp2();
    for (const auto& c : h2_) {
      if (c->usable()) co_return c;
    }
    const UpstreamEndpoint& ep = config_.endpoints[preferred_];
    if (!http2_ || !ep.tls || http1_only_[preferred_]) co_return nullptr;
    if (h2_dialing_) {
      // One dial at a time: a burst of watches waits for it rather than each dialing.
      const uint64_t dial = h2_dials_;
      co_await h2_dial_done_->async_wait(use_nothrow);
      if (h2_dials_ != dial && !h2_last_dial_.ok()) co_return h2_last_dial_;
      continue;
    }
    h2_dialing_ = true;
    if (!h2_dial_done_) h2_dial_done_ = std::make_unique<asio::steady_timer>(ioc_);
    h2_dial_done_->expires_at(asio::steady_timer::time_point::max());
    auto dialed = co_await DialHttp2();
    h2_dialing_ = false;
    ++h2_dials_;
    h2_last_dial_ = dialed.status();
    h2_dial_done_->cancel();
    if (!dialed.ok()) co_return dialed.status();
    if (*dialed == nullptr) co_return nullptr;
    h2_.push_back(*std::move(dialed));
  }
}

asio::awaitable<absl::StatusOr<std::shared_ptr<Http2Upstream>>> UpstreamPool::DialHttp2() {
  const size_t n = config_.endpoints.size();
  absl::Status last = absl::UnavailableError("no upstream endpoints configured");
  for (size_t attempt = 0; attempt < n; ++attempt) {
    const size_t i = (preferred_ + attempt) % n;
    auto stream = co_await Dial(config_.endpoints[i], /*offer_http2=*/true);
    if (!stream.ok()) {
      last = stream.status();
      continue;
    }
    preferred_ = i;
    if (!NegotiatedHttp2(**stream)) {
      http1_only_[i] = true;
      Release(Lease{*std::move(stream), i, false});
      co_return nullptr;
    }
    auto connection =
        std::make_shared<Http2Upstream>(*std::move(stream), i, stats_ ? &stats_->http2 : nullptr);
    if (stats_ != nullptr) stats_->http2.dialed.fetch_add(1, std::memory_order_relaxed);
    absl::Status started =
        co_await connection->Start(std::chrono::steady_clock::now() + dial_timeout_);
    if (started.ok()) co_return connection;
    last = started;
  }
  co_return last;
}

asio::awaitable<absl::StatusOr<std::unique_ptr<AnyStream>>> UpstreamPool::Dial(
    const UpstreamEndpoint& ep, bool offer_http2, std::chrono::steady_clock::time_point deadline) {
  const auto now = std::chrono::steady_clock::now();
  if (deadline <= now)
    co_return absl::UnavailableError(absl::StrCat("dial ", ep.Url(), ": no time left"));
  asio::ip::tcp::resolver resolver(ioc_);
  auto [rec, results] =
      co_await resolver.async_resolve(ep.host, std::to_string(ep.port), use_nothrow);
  if (rec) {
    co_return absl::UnavailableError(absl::StrCat("resolve ", ep.host, ": ", rec.message()));
  }
  beast::tcp_stream tcp(ioc_);
  // Resolving is not bounded here (the resolver has its own timeouts); connect and handshake are.
  tcp.expires_at(std::min(deadline, std::chrono::steady_clock::now() + dial_timeout_));
  auto [cec, endpoint] = co_await tcp.async_connect(results, use_nothrow);
  if (cec) {
    co_return absl::UnavailableError(absl::StrCat("dial ", ep.Url(), ": ", cec.message()));
  }
  (void)endpoint;
  beast::error_code ignored;
  tcp.socket().set_option(asio::ip::tcp::no_delay(true), ignored);
  tcp.socket().set_option(asio::socket_base::keep_alive(true), ignored);
  if (!ep.tls) co_return std::make_unique<AnyStream>(std::move(tcp));

  AnyStream::TlsStream tls(std::move(tcp), tls_);
  const std::string& name = config_.tls_server_name.empty() ? ep.host : config_.tls_server_name;
  // SNI carries host names only (RFC 6066), as Go's TLS client does.
  if (!IsIpLiteral(name)) SSL_set_tlsext_host_name(tls.native_handle(), name.c_str());
  // Go's transport offers both; an HTTP/1.1 connection offers nothing, as before.
  if (offer_http2) SSL_set_alpn_protos(tls.native_handle(), kAlpnHttp2, sizeof(kAlpnHttp2));
  if (!config_.insecure_skip_tls_verify)
    tls.set_verify_callback(asio::ssl::host_name_verification(name));
  auto [hec] = co_await tls.async_handshake(asio::ssl::stream_base::client, use_nothrow);
  if (hec) {
    co_return absl::UnavailableError(
        absl::StrCat("TLS handshake with ", ep.Url(), ": ", hec.message()));
  }
  co_return std::make_unique<AnyStream>(std::move(tls));
}

}  // namespace kf
