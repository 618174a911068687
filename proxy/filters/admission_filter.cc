#include "proxy/filters/admission_filter.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/await_callback.h"
#include "common/strings.h"

namespace kf {

ratelimit::RequestAttributes AdmissionFilter::Attributes(const Exchange& x) {
  const Request& r = x.request;
  const RequestInfo& info = r.info;
  ratelimit::RequestAttributes a;
  if (x.user) {
    a.user = x.user->username;
    a.groups = x.user->groups;
  } else if (x.unauthenticated) {
    // As the apiserver's APF sees them: one user, whatever their user agent or address says,
    // so rotating either buys no budget or queue of its own.
    a.user = "system:anonymous";
    a.groups = {"system:unauthenticated"};
  }
  a.user_agent = std::string(r.headers[beast::http::field::user_agent]);
  a.source = r.remote_ip;
  a.resource_request = info.is_resource_request;
  a.verb = info.is_resource_request ? info.verb : absl::AsciiStrToLower(ToAbsl(r.method_string));
  a.api_group = info.api_group;
  a.resource = info.resource;
  a.namespace_ = info.namespace_;
  a.path = info.path;
  a.long_running = info.verb == "watch";
  a.cached_read = x.route == Route::kCache && (info.verb == "get" || info.verb == "list");
  if (x.user) a.bound_to = BoundTo(*x.user);
  return a;
}

std::string AdmissionFilter::BoundTo(const Identity& user) {
  // The claims the apiserver's ServiceAccount authenticator puts in a pod-bound token's user
  // (k8s.io/apiserver/pkg/authentication/serviceaccount: NodeNameKey, PodNameKey).
  auto first = [&user](std::string_view key) -> std::string {
    for (const auto& [k, values] : user.extra) {
      if (k == key && !values.empty()) return values.front();
    }
    return "";
  };
  if (std::string node = first("authentication.kubernetes.io/node-name"); !node.empty()) {
    return absl::StrCat("node/", node);
  }
  if (std::string pod = first("authentication.kubernetes.io/pod-name"); !pod.empty()) {
    return absl::StrCat("pod/", pod);
  }
  return "";
}

asio::awaitable<ratelimit::Decision> AdmissionFilter::Decide(
    const ratelimit::RequestAttributes& a) {
  // The decision may come from another thread (a seat freed there). Queued requests are
  // decided by a freed seat or by ExpireQueued within their level's wait limit; the bound here
  // only guards against a decision that never comes.
  ratelimit::Admission& admission = admission_;
  auto decision = co_await AwaitCallback<ratelimit::Decision>(
      [&admission, &a](std::function<void(ratelimit::Decision)> done) {
        admission.Admit(a, std::move(done));
      },
      std::chrono::minutes(5));
  if (!decision) {
    ratelimit::Decision d;
    d.reject_reason = "time-out";
    co_return d;
  }
  co_return std::move(*decision);
}

asio::awaitable<void> AdmissionFilter::Serve(Exchange& x, const Next& next) {
  // Only the seat stays in this frame while the request runs (a watch: for hours); the
  // decision, what it was asked from and a refusal's answer are Admit's.
  ratelimit::Seat seat;
  const bool admitted = co_await Admit(x, &seat);
  if (admitted) co_await next(x);
}

asio::awaitable<void> AdmissionFilter::Refuse(Exchange& x, const ratelimit::Decision& refused) {
  // Named: a temporary bound to Reject's reference inside co_await is what GCC 12 may free twice.
  const KubeStatus status = TooManyRequestsStatus(refused.retry_after_seconds);
  co_await x.Reject(status, absl::StrCat("admission: ", refused.reject_reason, " (",
                                         refused.flow.schema, "/", refused.flow.level, ")"));
}

asio::awaitable<bool> AdmissionFilter::Admit(Exchange& x, ratelimit::Seat* seat) {
  const ratelimit::RequestAttributes a = Attributes(x);
  ratelimit::Decision admitted = co_await Decide(a);
  if (!admitted.admitted) {
    co_await Refuse(x, admitted);
    co_return false;
  }
  x.priority_level = admitted.flow.level;
  x.flow_schema = admitted.flow.schema;
  x.flow_key = admitted.flow.key;
  x.drop_managed_fields = admitted.flow.drop_managed_fields;
  x.admitted_as_cached_read = a.cached_read;
  // A watch's seat is given back here, as it starts.
  if (x.request.info.verb != "watch") *seat = std::move(admitted.seat);
  co_return true;
}

}  // namespace kf
