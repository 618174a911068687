#include "proxy/filters/passthrough_charge.h"

#include "proxy/filters/admission_filter.h"

namespace kf {

asio::awaitable<void> PassthroughCharge::Serve(Exchange& x, const Next& next) {
  if (x.admitted_as_cached_read) {
    // Paid once: a request reaches the relay once.
    x.admitted_as_cached_read = false;
    const ratelimit::Decision charged = admission_.ChargePassthrough(
        ratelimit::Flow{x.flow_schema, x.priority_level, x.flow_key, x.drop_managed_fields});
    if (!charged.admitted) {
      co_await AdmissionFilter::Refuse(x, charged);
      co_return;
    }
  }
  co_await next(x);
}

}  // namespace kf
