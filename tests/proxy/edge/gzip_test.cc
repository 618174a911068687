#include "proxy/edge/gzip.h"

#include <zlib.h>

#include <array>
#include <catch2/catch.hpp>
#include <string>

namespace kf {
namespace {

namespace http = boost::beast::http;
namespace asio = boost::asio;

std::string Gunzip(const std::string& in) {
  z_stream z{};
  REQUIRE(inflateInit2(&z, 15 + 16) == Z_OK);
  std::string out(1 << 22, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int rv = inflate(&z, Z_FINISH);
  inflateEnd(&z);
  REQUIRE(rv == Z_STREAM_END);
  out.resize(z.total_out);
  return out;
}

TEST_CASE("AcceptsGzip reads Accept-Encoding as the apiserver's negotiateContentEncoding") {
  const std::pair<const char*, bool> cases[] = {
      {"gzip", true},  {"gzip, deflate", true}, {" br , gzip ", true}, {"deflate", false},
      {"GZIP", false}, {"gzip;q=1.0", false},   {"x-gzip", false},     {"", false},
  };
  for (const auto& [value, accepts] : cases) {
    INFO(value);
    http::fields f;
    f.set(http::field::accept_encoding, value);
    CHECK(AcceptsGzip(f) == accepts);
  }
  http::fields none;
  CHECK_FALSE(AcceptsGzip(none));
  // Only the first field counts (Go's Header.Get).
  http::fields two;
  two.insert(http::field::accept_encoding, "identity");
  two.insert(http::field::accept_encoding, "gzip");
  CHECK_FALSE(AcceptsGzip(two));
}

TEST_CASE("Gzip compresses pieces into one member with Go's gzip header") {
  const std::string a(200000, 'a'), b = "{\"items\":[]}", c(70000, 'c');
  const std::array<asio::const_buffer, 3> pieces{asio::buffer(a), asio::buffer(b), asio::buffer(c)};
  const std::string gz = Gzip(pieces);
  REQUIRE(gz.size() > 18);
  CHECK(gz.size() < 10000);
  // ID1 ID2 CM FLG MTIME(4) XFL OS: deflate, no name, no time, level 1 (XFL 4), OS unknown.
  const std::string header(gz.data(), 10);
  CHECK(header == std::string("\x1f\x8b\x08\x00\x00\x00\x00\x00\x04\xff", 10));
  CHECK(Gunzip(gz) == a + b + c);
  CHECK(Gunzip(Gzip({})).empty());
}

}  // namespace
}  // namespace kf
