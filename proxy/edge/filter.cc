#include "proxy/edge/filter.h"

namespace kf {

asio::awaitable<void> RunChain(std::span<Filter* const> filters, Exchange& x, const Next& last) {
  if (filters.empty()) {
    co_await last(x);
    co_return;
  }
  const Next next = [filters, &last](Exchange& e) { return RunChain(filters.subspan(1), e, last); };
  co_await filters.front()->Serve(x, next);
}

}  // namespace kf
