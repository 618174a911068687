// InFlightCap: the upstream's shield: at most `limit` passthrough requests in flight to it at
// once, besides long-running ones (watches, tunnels) and the exempt priority level. Over it:
// 429 with Retry-After 1.
//
// Shared by every worker; the counters are atomic.
#ifndef KUBE_FANOUT_FILTERS_IN_FLIGHT_CAP_H_
#define KUBE_FANOUT_FILTERS_IN_FLIGHT_CAP_H_

#include <atomic>
#include <cstdint>

#include "proxy/edge/filter.h"

namespace kf {

class InFlightCap : public Filter {
 public:
  explicit InFlightCap(int limit) : limit_(limit) {}

  asio::awaitable<void> Serve(Exchange& x, const Next& next) override;

  int64_t in_flight() const { return in_flight_.load(std::memory_order_relaxed); }
  uint64_t rejected() const { return rejected_.load(std::memory_order_relaxed); }

 private:
  int limit_;  // 0: unlimited.
  std::atomic<int64_t> in_flight_{0};
  std::atomic<uint64_t> rejected_{0};
};

}  // namespace kf

#endif  // KUBE_FANOUT_FILTERS_IN_FLIGHT_CAP_H_
