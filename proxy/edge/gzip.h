// Response compression as the apiserver does it (k8s.io/apiserver/pkg/endpoints/handlers/
// responsewriters/writers.go): a serialized object or list past 128 KiB is gzip-compressed at
// level 1 (BestSpeed) for a client whose Accept-Encoding asks for gzip, with "Content-Encoding:
// gzip" and "Vary: Accept-Encoding". A watch is compressed only when it is a WatchList (see
// proxy/serve/watch_gzip.h). Stateless functions.
#ifndef KUBE_FANOUT_EDGE_GZIP_H_
#define KUBE_FANOUT_EDGE_GZIP_H_

#include <boost/asio/buffer.hpp>
#include <boost/beast/http/fields.hpp>
#include <cstddef>
#include <span>
#include <string>

namespace kf {

// defaultGzipThresholdBytes: bodies larger than this are compressed.
inline constexpr size_t kGzipThresholdBytes = 128 * 1024;

// negotiateContentEncoding: the first Accept-Encoding field, split at commas, has a token that
// is exactly "gzip" once trimmed (no q-values, case-sensitive, as the apiserver reads it).
bool AcceptsGzip(const boost::beast::http::fields& request);

// The pieces as one gzip member (RFC 1952) at level 1, with Go's compress/gzip header (no
// name, no time, OS "unknown").
std::string Gzip(std::span<const boost::asio::const_buffer> pieces);

}  // namespace kf

#endif  // KUBE_FANOUT_EDGE_GZIP_H_
