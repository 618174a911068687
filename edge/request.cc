#include "edge/request.h"

#include <array>

namespace kf {

asio::awaitable<std::optional<std::string>> ReadWholeBody(BodySource& body, size_t limit) {
  std::string whole;
  std::array<char, 16384> piece;
  while (!body.done()) {
    auto [ec, n] = co_await body.ReadSome(piece);
    if (ec) co_return std::nullopt;
    whole.append(piece.data(), n);
    if (whole.size() > limit) co_return std::nullopt;
  }
  co_return whole;
}

}  // namespace kf
