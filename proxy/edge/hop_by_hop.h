// Header hygiene for a forwarding proxy (RFC 9110 §7.6.1): which fields belong to one hop and
// must not be forwarded, and whether a request asks to switch protocols. Stateless functions.
#ifndef KUBE_FANOUT_EDGE_HOP_BY_HOP_H_
#define KUBE_FANOUT_EDGE_HOP_BY_HOP_H_

#include <boost/beast/http/fields.hpp>
#include <string_view>

namespace kf {

// Copies `from` into `to`, leaving out hop-by-hop fields: Connection and every field it names,
// Keep-Alive, Proxy-Connection, Proxy-Authenticate, Proxy-Authorization, TE, Trailer,
// Transfer-Encoding and Upgrade. Message framing (Transfer-Encoding) is the caller's to set;
// Content-Length is end-to-end and copied. Expect: 100-continue is answered by the proxy itself,
// so it is left out too.
void CopyEndToEndFields(const boost::beast::http::fields& from, boost::beast::http::fields& to);

// True for "Connection: upgrade" with an Upgrade field (SPDY/3.1 and websocket for kubectl exec,
// attach, port-forward; tokens are case-insensitive, Connection may list several).
bool IsUpgradeRequest(const boost::beast::http::fields& fields);

// True when Connection lists `token` (case-insensitive).
bool ConnectionHasToken(const boost::beast::http::fields& fields, std::string_view token);

}  // namespace kf

#endif  // KUBE_FANOUT_EDGE_HOP_BY_HOP_H_
