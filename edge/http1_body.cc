#include "edge/http1_body.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/http/read.hpp>

namespace kf {
namespace {

// A client sending a body must keep it coming (Go's server has no such limit by default; this
// only frees connections that stalled for good).
constexpr auto kBodyIdleTimeout = std::chrono::seconds(120);

}  // namespace

asio::awaitable<std::pair<beast::error_code, size_t>> Http1Body::ReadSome(std::span<char> into) {
  namespace http = beast::http;
  if (parser_.is_done()) co_return std::pair{beast::error_code{}, size_t{0}};
  parser_.get().body().data = into.data();
  parser_.get().body().size = into.size();
  stream_.tcp().expires_after(kBodyIdleTimeout);
  auto [ec, n] = co_await http::async_read_some(stream_, buffer_, parser_,
                                                asio::as_tuple(asio::use_awaitable));
  if (ec == http::error::need_buffer) ec = {};
  co_return std::pair{ec, into.size() - parser_.get().body().size};
}

}  // namespace kf
