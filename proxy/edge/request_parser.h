// BoundedParser: Beast's HTTP parser without Beast's one way to throw on untrusted bytes, and
// RequestParser, the client side's, with the limits of Go's net/http server in front of the
// apiserver.
//
// Beast stores each field at 16-bit offsets and throws std::length_error for a field name or
// value past 65,533 bytes (basic_fields::new_element); thrown inside an Asio handler that would
// end the process. Here such a field is the parse error `header_limit`. RequestParser also
// takes a header up to Go's http.DefaultMaxHeaderBytes (1 MiB) plus the 4 KiB its reader
// allows beyond it; the session answers both with Go's 431. (Go itself takes single fields up
// to the whole 1 MiB; a field over 64 KiB is the one request kube-fanout refuses that the
// apiserver would read.) Upstream responses use BoundedParser with Beast's header limit.
#ifndef KUBE_FANOUT_EDGE_REQUEST_PARSER_H_
#define KUBE_FANOUT_EDGE_REQUEST_PARSER_H_

#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <cstdint>
#include <limits>

namespace kf {

template <bool isRequest, class Body>
class BoundedParser : public boost::beast::http::parser<isRequest, Body> {
 public:
  static constexpr size_t kMaxFieldBytes = std::numeric_limits<std::uint16_t>::max() - 2;

 private:
  void on_field_impl(boost::beast::http::field name, boost::beast::string_view name_string,
                     boost::beast::string_view value, boost::beast::error_code& ec) override {
    if (name_string.size() > kMaxFieldBytes || value.size() > kMaxFieldBytes) {
      ec = boost::beast::http::error::header_limit;
      return;
    }
    this->get().insert(name, name_string, value);
  }
};

class RequestParser : public BoundedParser<true, boost::beast::http::buffer_body> {
 public:
  static constexpr size_t kMaxHeaderBytes = (1u << 20) + 4096;
  RequestParser() {
    body_limit(boost::none);  // Bodies are streamed, not held.
    header_limit(static_cast<std::uint32_t>(kMaxHeaderBytes));
  }
};

}  // namespace kf

#endif  // KUBE_FANOUT_EDGE_REQUEST_PARSER_H_
