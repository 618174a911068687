#include "proxy/edge/gzip.h"

#include <zlib.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_split.h"
#include "common/strings.h"

namespace kf {
namespace {

constexpr int kLevel = 1;             // defaultGzipContentEncodingLevel (gzip.BestSpeed).
constexpr int kGzipWindow = 15 + 16;  // 32 KiB window, gzip wrapper.
constexpr int kOsUnknown = 255;       // What Go's gzip.Writer writes.
constexpr size_t kOutStep = 64 * 1024;

}  // namespace

bool AcceptsGzip(const boost::beast::http::fields& request) {
  const auto it = request.find(boost::beast::http::field::accept_encoding);
  if (it == request.end()) return false;
  for (absl::string_view token : absl::StrSplit(ToAbsl(it->value()), ',')) {
    if (absl::StripAsciiWhitespace(token) == "gzip") return true;
  }
  return false;
}

std::string Gzip(std::span<const boost::asio::const_buffer> pieces) {
  z_stream z{};
  if (deflateInit2(&z, kLevel, Z_DEFLATED, kGzipWindow, 8, Z_DEFAULT_STRATEGY) != Z_OK) return {};
  gz_header header{};
  header.os = kOsUnknown;
  deflateSetHeader(&z, &header);
  std::string out;
  size_t used = 0;
  // Runs deflate over the current input with `flush`, growing `out` as it fills.
  const auto run = [&](int flush) {
    for (;;) {
      if (used == out.size()) out.resize(out.size() + kOutStep);
      z.next_out = reinterpret_cast<Bytef*>(out.data() + used);
      z.avail_out = static_cast<uInt>(out.size() - used);
      const int rv = deflate(&z, flush);
      used = out.size() - z.avail_out;
      if (rv == Z_STREAM_END || (flush == Z_NO_FLUSH && z.avail_in == 0 && z.avail_out > 0) ||
          (rv != Z_OK && rv != Z_BUF_ERROR)) {
        return;
      }
    }
  };
  for (const auto& piece : pieces) {
    z.next_in = reinterpret_cast<Bytef*>(const_cast<void*>(piece.data()));
    z.avail_in = static_cast<uInt>(piece.size());
    run(Z_NO_FLUSH);
  }
  z.next_in = nullptr;
  z.avail_in = 0;
  run(Z_FINISH);
  deflateEnd(&z);
  out.resize(used);
  return out;
}

}  // namespace kf
