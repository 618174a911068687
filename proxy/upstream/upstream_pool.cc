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
#include "common/x509_cache.h"

namespace kf {
namespace {

constexpr size_t kMaxIdlePerEndpoint = 64;
// Go's http.Server closes idle keep-alive connections after its IdleTimeout; reusing one close to
// that edge races its close, so idle connections are retired well before.
constexpr auto kMaxIdleAge = std::chrono::seconds(30);
constexpr auto use_nothrow = asio::as_tuple(asio::use_awaitable);

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
                           UpstreamPoolStats* stats)
    : ioc_(ioc),
      config_(config),
      tls_(tls),
      dial_timeout_(dial_timeout),
      stats_(stats),
      idle_(config.endpoints.size()) {}

asio::awaitable<absl::StatusOr<UpstreamPool::Lease>> UpstreamPool::Acquire(bool allow_reuse) {
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
  for (size_t attempt = 0; attempt < n; ++attempt) {
    const size_t i = (preferred_ + attempt) % n;
    auto stream = co_await Dial(config_.endpoints[i]);
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

asio::awaitable<absl::StatusOr<std::unique_ptr<AnyStream>>> UpstreamPool::Dial(
    const UpstreamEndpoint& ep) {
  asio::ip::tcp::resolver resolver(ioc_);
  auto [rec, results] =
      co_await resolver.async_resolve(ep.host, std::to_string(ep.port), use_nothrow);
  if (rec) {
    co_return absl::UnavailableError(absl::StrCat("resolve ", ep.host, ": ", rec.message()));
  }
  beast::tcp_stream tcp(ioc_);
  tcp.expires_after(dial_timeout_);
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
