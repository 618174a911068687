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

#include "absl/status/status.h"
#include "proxy/edge/request.h"

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
  // The one place an identity becomes upstream header fields: `user` in the first name of each
  // list (extra keys escaped so that the apiserver's lowercase-then-unescape gives them back).
  // Every value is checked first (proxy/edge/field_syntax.h: no control byte, no leading or
  // trailing blank, what Beast can hold), and so is every name; on any failure nothing is written
  // and the answer is InvalidArgument saying why (escaped). Identity fields already in `fields` are
  // removed first (Strip).
  absl::Status Assert(const Identity& user, boost::beast::http::fields& fields) const;
  // The user a front proxy names, read as the apiserver's request-header authenticator reads
  // it (k8s.io/apiserver/pkg/authentication/request/headerrequest/requestheader.go): the user
  // and the uid from the first *value* of each configured name, in order, the first non-empty
  // one winning; groups every value of each group name, in order, empty ones skipped; extra
  // keys the field name past the prefix, lowercased, then path-unescaped (a malformed escape
  // keeps the lowercased key as it is), with every value, empty ones too. nullopt without a
  // user name. The values are as sent: whether they may be vouched for is Vouch's question.
  std::optional<Identity> Read(const boost::beast::http::fields& fields) const;
};

// kubeadm's names (the struct's defaults), for whoever is not told otherwise.
const RequestHeaderNames& DefaultRequestHeaderNames();

}  // namespace kf

#endif  // KUBE_FANOUT_UPSTREAM_REQUEST_HEADER_H_
