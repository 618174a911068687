// The bytes an HTTP/1.1 request head may carry, as Go's net/http checks them (httpguts:
// ValidHeaderFieldName, ValidHeaderFieldValue), and the stricter rule for identity values that
// kube-fanout writes into request-header (front-proxy) fields. Stateless functions.
//
// Why identities are stricter: the apiserver reads X-Remote-User and friends with Go's
// textproto, which trims leading and trailing SP and HTAB, so a certificate user
// "system:node:victim " would arrive as "system:node:victim"; and Beast does not check what it
// writes, so a CR or LF in a value becomes a field of its own. Either would let a subject name
// someone else. Such an identity authenticates no one (proxy/upstream/vouched.h).
#ifndef KUBE_FANOUT_EDGE_FIELD_SYNTAX_H_
#define KUBE_FANOUT_EDGE_FIELD_SYNTAX_H_

#include <boost/beast/http/fields.hpp>
#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "proxy/edge/request.h"

namespace kf {

// The longest field name or value Beast can hold (16-bit offsets, 2 bytes of its own); past it
// Beast throws. Every field kube-fanout builds is checked against it first.
inline constexpr size_t kMaxFieldBytes = 65533;

// RFC 9110 token: one or more tchar.
bool IsFieldName(std::string_view name);
// No control byte (0x00-0x1F but HTAB, and 0x7F); obs-text (0x80-0xFF) allowed, as in Go.
bool IsFieldValue(std::string_view value);
// A request target kube-fanout may write on a request line: no control byte, no SP.
bool IsRequestTarget(std::string_view target);

// OK when `value` may be an identity's field value: IsFieldValue, no leading or trailing SP or
// HTAB, at most kMaxFieldBytes. Else InvalidArgument saying which byte where (escaped).
absl::Status CheckIdentityValue(std::string_view what, std::string_view value);
// Every value of `user` (name, uid, groups, extra values; extra keys are escaped when written).
absl::Status CheckIdentity(const Identity& user);

// OK when every field of `fields` has an IsFieldName name and an IsFieldValue value, each at
// most kMaxFieldBytes; else InvalidArgument naming the field (escaped).
absl::Status CheckFields(const boost::beast::http::fields& fields);

// CheckFields, and a request line of a token method and an IsRequestTarget target: what every
// request head kube-fanout writes upstream passes first.
absl::Status CheckRequestHead(std::string_view method, std::string_view target,
                              const boost::beast::http::fields& fields);

// `bytes` for a log line: C escapes for anything not printable ASCII, cut at 256 bytes.
std::string LogEscaped(std::string_view bytes);

}  // namespace kf

#endif  // KUBE_FANOUT_EDGE_FIELD_SYNTAX_H_
