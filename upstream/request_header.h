// RequestHeaderIdentity: the apiserver's request-header (front-proxy) authentication, from the
// proxy's side, as kube-aggregator uses it. A user kube-fanout cannot forward as it came (one
// authenticated by a client certificate, which ends at kube-fanout's TLS listener) reaches the
// apiserver over a connection that presents --proxy-client-cert-file (signed by the apiserver's
// --requestheader-client-ca-file, its CN in --requestheader-allowed-names), with the user,
// groups and uid in the header fields the apiserver is configured for
// (--requestheader-username-headers, -group-headers, -uid-headers, -extra-headers-prefix).
// Fields of those names that a client sends are removed from every request, whoever sent it.
#ifndef KUBE_FANOUT_UPSTREAM_REQUEST_HEADER_H_
#define KUBE_FANOUT_UPSTREAM_REQUEST_HEADER_H_

#include <boost/beast/http/fields.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "edge/request.h"

namespace kf {

struct RequestHeaderNames {
  // kubeadm's values, the usual ones: also the fields removed when no front proxy is set up.
  std::vector<std::string> username{"X-Remote-User"};
  std::vector<std::string> group{"X-Remote-Group"};
  std::vector<std::string> uid{"X-Remote-Uid"};
  std::vector<std::string> extra_prefix{"X-Remote-Extra-"};

  // True for a field the apiserver would read an identity from (case-insensitive).
  bool Names(std::string_view field) const;
  // Removes every such field.
  void Strip(boost::beast::http::fields& fields) const;
  // Sets `user` in the first name of each list (extra keys path-escaped as Go's
  // url.PathEscape, which the apiserver undoes).
  void Assert(const Identity& user, boost::beast::http::fields& fields) const;
  // The user a front proxy names, as the apiserver's request-header authenticator reads it:
  // the first non-empty user and uid fields, every group field's values, extra keys lowercased
  // and unescaped. nullopt without a user name.
  std::optional<Identity> Read(const boost::beast::http::fields& fields) const;
};

// kubeadm's names (the struct's defaults), for whoever is not told otherwise.
const RequestHeaderNames& DefaultRequestHeaderNames();

// The user a request's connection vouches for, before any bearer token (the apiserver's chain:
// request-header, then x509): a front proxy's fields, else its client certificate's user.
std::optional<Identity> VouchedUser(const Request& r, const RequestHeaderNames& names);

}  // namespace kf

#endif  // KUBE_FANOUT_UPSTREAM_REQUEST_HEADER_H_
