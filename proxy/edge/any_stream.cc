#include "proxy/edge/any_stream.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace kf {

asio::awaitable<beast::error_code> AnyStream::ServerHandshake() {
  // Asio's stream serves upstream connections only, which are clients.
  TlsServerStream* tls = tls_server();
  if (tls == nullptr) co_return beast::error_code{};
  const beast::error_code ec = co_await tls->Handshake();
  co_return ec;
}

asio::awaitable<void> AnyStream::Close(std::chrono::milliseconds tls_shutdown_budget) {
  if (auto* p = std::get_if<std::unique_ptr<TlsServerStream>>(&stream_)) {
    tcp().expires_after(tls_shutdown_budget);
    co_await (*p)->Shutdown();
  } else if (auto* s = std::get_if<TlsStream>(&stream_)) {
    tcp().expires_after(tls_shutdown_budget);
    // The peer may already be gone; any answer (or none within the budget) ends the exchange.
    co_await s->async_shutdown(asio::as_tuple(asio::use_awaitable));
  }
  beast::error_code ec;
  tcp().socket().shutdown(asio::ip::tcp::socket::shutdown_both, ec);
  tcp().close();
}

}  // namespace kf
