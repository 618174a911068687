#include "proxy/passthrough/tunnel.h"

#include <array>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include "common/use_nothrow.h"
#include "proxy/edge/deadlines.h"

namespace kf {
namespace {

constexpr size_t kPiece = 16 * 1024;
constexpr auto kTunnelIdleTimeout = std::chrono::hours(4);

asio::awaitable<beast::error_code> CopyStream(AnyStream& from, AnyStream& to) {
  std::array<char, kPiece> buf;
  for (;;) {
    from.tcp().expires_after(kTunnelIdleTimeout);
    auto [rec, n] = co_await from.async_read_some(asio::buffer(buf), use_nothrow);
    if (rec) co_return rec;
    to.tcp().expires_after(kWriteTimeout);
    auto [wec, wn] = co_await asio::async_write(to, asio::buffer(buf.data(), n), use_nothrow);
    if (wec) co_return wec;
  }
}

}  // namespace

asio::awaitable<void> Tunnel(Upgraded client, AnyStream& up, beast::flat_buffer& up_pending) {
  using namespace asio::experimental::awaitable_operators;
  if (up_pending.size() > 0) {
    client.stream.tcp().expires_after(kWriteTimeout);
    auto [ec, n] = co_await asio::async_write(client.stream, up_pending.data(), use_nothrow);
    if (ec) co_return;
    up_pending.consume(n);
  }
  if (!client.pending.empty()) {
    up.tcp().expires_after(kWriteTimeout);
    auto [ec, n] = co_await asio::async_write(up, asio::buffer(client.pending), use_nothrow);
    if (ec) co_return;
  }
  co_await (CopyStream(client.stream, up) || CopyStream(up, client.stream));
}

}  // namespace kf
