// IdentityFilter: learns who is asking (WhoAmI: the apiserver's SelfSubjectReview with the
// client's own credentials, cached per credential) when a later step needs it: admission's
// flows, and the Event spam filter's keys. Unknown callers go on without an identity.
//
// One per worker thread (WhoAmI and the pool are that thread's).
#ifndef KUBE_FANOUT_FILTERS_IDENTITY_FILTER_H_
#define KUBE_FANOUT_FILTERS_IDENTITY_FILTER_H_

#include "edge/filter.h"
#include "upstream/identity.h"
#include "upstream/upstream_pool.h"

namespace kf {

class IdentityFilter : public Filter {
 public:
  // `always`: look every request up (admission is on); else only Event creations, when
  // `event_creations` (the spam filter is on).
  IdentityFilter(WhoAmI& who, UpstreamPool& pool, bool always, bool event_creations)
      : who_(who), pool_(pool), always_(always), event_creations_(event_creations) {}

  asio::awaitable<void> Serve(Exchange& x, const Next& next) override;

 private:
  WhoAmI& who_;
  UpstreamPool& pool_;
  bool always_;
  bool event_creations_;
};

}  // namespace kf

#endif  // KUBE_FANOUT_FILTERS_IDENTITY_FILTER_H_
