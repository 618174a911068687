#include "common/any_stream.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace kf {

asio::awaitable<void> AnyStream::Close(std::chrono::milliseconds tls_shutdown_budget) {
  if (TlsStream* s = tls()) {
    tcp().expires_after(tls_shutdown_budget);
    // The peer may already be gone; any answer (or none within the budget) ends the exchange.
    co_await s->async_shutdown(asio::as_tuple(asio::use_awaitable));
  }
  beast::error_code ec;
  tcp().socket().shutdown(asio::ip::tcp::socket::shutdown_both, ec);
  tcp().close();
}

}  // namespace kf
