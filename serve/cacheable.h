// Which reads the cache answers, and with which filter. Anything it cannot answer exactly
// (another representation, paginated or Exact-RV forms the apiserver words its own errors
// for, invalid parameters, selector errors) is declined and passes through; the apiserver
// then answers it itself. Stateless.
#ifndef KUBE_FANOUT_SERVE_CACHEABLE_H_
#define KUBE_FANOUT_SERVE_CACHEABLE_H_

#include <boost/beast/http/fields.hpp>
#include <optional>

#include "cache/cacher.h"
#include "edge/request_info.h"

namespace kf {

// The request's verb and query are ones the cache answers exactly as the apiserver would.
bool Cacheable(const RequestInfo& info, const boost::beast::http::fields& headers);

// The watch filter the request selects by (namespace, labels, fields renamed as the apiserver
// renames them, the object of a legacy single-object watch); nullopt: the apiserver's error
// to give.
std::optional<WatchFilter> FilterFor(const RequestInfo& info, const ResourceType& type);

}  // namespace kf

#endif  // KUBE_FANOUT_SERVE_CACHEABLE_H_
