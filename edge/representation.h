// Representation: what the apiserver itself must render. The cache holds each object as the
// apiserver's compact JSON; anything else (protobuf-only or YAML Accept, Table or
// PartialObjectMetadata conversion, pretty-printed output, another user's view through
// impersonation) only the apiserver can answer exactly. The one place this is decided.
// Stateless.
#ifndef KUBE_FANOUT_EDGE_REPRESENTATION_H_
#define KUBE_FANOUT_EDGE_REPRESENTATION_H_

#include <boost/beast/http/fields.hpp>
#include <string_view>

#include "edge/request_info.h"

namespace kf {

// The apiserver pretty-prints JSON for these user agents (curl, Wget, browsers) and on ?pretty.
bool PrettyUserAgent(std::string_view ua);

// True when the answer must come from the apiserver's own encoders (see above).
bool ApiserverRendersAnswer(const RequestInfo& info, const boost::beast::http::fields& headers);

}  // namespace kf

#endif  // KUBE_FANOUT_EDGE_REPRESENTATION_H_
