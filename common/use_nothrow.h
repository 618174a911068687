// use_nothrow: the completion token of a coroutine that checks each operation's error code itself
// (`auto [ec, n] = co_await stream.async_read_some(buffer, use_nothrow);`): no exceptions from
// our code (STYLE.md).
#ifndef KUBE_FANOUT_COMMON_USE_NOTHROW_H_
#define KUBE_FANOUT_COMMON_USE_NOTHROW_H_

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace kf {

inline constexpr auto use_nothrow = boost::asio::as_tuple(boost::asio::use_awaitable);

}  // namespace kf

#endif  // KUBE_FANOUT_COMMON_USE_NOTHROW_H_
