// CoalescingFilter: identical concurrent passthrough reads share one upstream call
// (coalescer.h). A follower waits for the next call and gets its answer; a leader is relayed as
// usual through a Response that keeps a copy (up to a limit) for them. A follower whose leader
// failed goes upstream alone.
//
// Requests share an answer only when they are alike (CoalesceKey) and were vouched for as the
// same user in the same way (proxy/upstream/vouched.h: a token, a verified certificate, a trusted
// front proxy, anonymous): a certificate and a front proxy naming the same user never share, and
// the request-header fields a client copies name no one unless a trusted front proxy sent them. A
// request with a certificate that is presented but neither verified nor a trusted front proxy's
// never shares at all (whatever token it carries).
//
// Shared by every worker; Coalescer is thread-safe.
#ifndef KUBE_FANOUT_PASSTHROUGH_COALESCING_FILTER_H_
#define KUBE_FANOUT_PASSTHROUGH_COALESCING_FILTER_H_

#include <optional>
#include <string>

#include "proxy/edge/filter.h"
#include "proxy/passthrough/coalescer.h"
#include "proxy/upstream/request_header.h"

namespace kf {

class CoalescingFilter : public Filter {
 public:
  // `names`: the request-header fields trusted front proxies name users in.
  CoalescingFilter(Coalescer& coalescer, const RequestHeaderNames& names)
      : coalescer_(coalescer), names_(names) {}

  asio::awaitable<void> Serve(Exchange& x, const Next& next) override;

  // Which requests may share an answer: bodiless GETs and LISTs going upstream.
  static bool Applies(const Exchange& x);

  // What requests that may share an answer share it under: CoalesceKey, then who (Vouched::Key).
  // nullopt: never shared (a refused or unverifiable certificate).
  static std::optional<std::string> Key(const Request& r, const RequestHeaderNames& names);

 private:
  asio::awaitable<void> Lead(Exchange& x, const Next& next, const std::string& key,
                             Coalescer::Ticket ticket);

  Coalescer& coalescer_;
  const RequestHeaderNames& names_;
};

}  // namespace kf

#endif  // KUBE_FANOUT_PASSTHROUGH_COALESCING_FILTER_H_
