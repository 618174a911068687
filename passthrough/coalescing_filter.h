// CoalescingFilter: identical concurrent passthrough reads share one upstream call
// (coalescer.h). A follower waits for the next call and gets its answer; a leader is relayed as
// usual through a Response that keeps a copy (up to a limit) for them. A follower whose leader
// failed goes upstream alone.
//
// Shared by every worker; Coalescer is thread-safe.
#ifndef KUBE_FANOUT_PASSTHROUGH_COALESCING_FILTER_H_
#define KUBE_FANOUT_PASSTHROUGH_COALESCING_FILTER_H_

#include "edge/filter.h"
#include "passthrough/coalescer.h"

namespace kf {

class CoalescingFilter : public Filter {
 public:
  explicit CoalescingFilter(Coalescer& coalescer) : coalescer_(coalescer) {}

  asio::awaitable<void> Serve(Exchange& x, const Next& next) override;

  // Which requests may share an answer: bodiless GETs and LISTs going upstream.
  static bool Applies(const Exchange& x);

 private:
  asio::awaitable<void> Lead(Exchange& x, const Next& next, const std::string& key,
                             Coalescer::Ticket ticket);

  Coalescer& coalescer_;
};

}  // namespace kf

#endif  // KUBE_FANOUT_PASSTHROUGH_COALESCING_FILTER_H_
