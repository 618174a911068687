// Vouched: who a request is before any TokenReview, and how that is vouched for: by a trusted
// front proxy's request-header fields, by a verified client certificate, by a bearer token (its
// user the TokenReview's to say), by nothing (anonymous); or refused: a certificate that does
// not verify (and nothing else authenticates the request), or an identity kube-fanout could not
// carry upstream unchanged (proxy/edge/field_syntax.h). Computed in one place (Vouch), in the order
// of the apiserver's authenticator chain: request-header, x509, then tokens.
//
// Its key (IdentityKey) is what everything that hands one request's answer to another keys
// on: the coalescing of passthrough reads and the access-review cache. Two requests share an
// answer only if they were vouched for the same way as the same user. Value type.
#ifndef KUBE_FANOUT_UPSTREAM_VOUCHED_H_
#define KUBE_FANOUT_UPSTREAM_VOUCHED_H_

#include <string>
#include <string_view>

#include "proxy/edge/request.h"
#include "proxy/upstream/request_header.h"

namespace kf {

struct Vouched {
  enum class By {
    kNone,                 // Not known (no request looked at).
    kAnonymous,            // No credentials at all.
    kToken,                // A bearer token: `user` unknown here (the TokenReview's).
    kCertificate,          // A verified client certificate's subject.
    kFrontProxy,           // A trusted front proxy's request-header fields.
    kRejectedCertificate,  // Refused (401): `why` says why.
  };
  By by = By::kNone;
  Identity user;           // kCertificate, kFrontProxy: the user kube-fanout asserts upstream.
  std::string credential;  // kToken: the SHA-256 of the token (never the token itself).
  std::string why;         // kRejectedCertificate: why, for the log (bytes escaped).

  // A user kube-fanout asserts upstream in its own request-header fields.
  bool asserted() const { return by == By::kCertificate || by == By::kFrontProxy; }
  // IdentityKey(by, user) and, for a token, its digest.
  std::string Key() const;
};

// Injective: equal keys only for equal (by, user). Every part is length-prefixed and every
// list counted, so no value can pose as a boundary.
std::string IdentityKey(Vouched::By by, const Identity& user);

// The request's identity as its connection and credentials vouch for it.
Vouched Vouch(const Request& r, const RequestHeaderNames& names);

// The SHA-256 of `token`, raw bytes: how tokens are told apart without being kept.
std::string TokenDigest(std::string_view token);

// "token", "certificate", ...: for logs and test names.
std::string_view ByName(Vouched::By by);

}  // namespace kf

#endif  // KUBE_FANOUT_UPSTREAM_VOUCHED_H_
