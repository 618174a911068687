#include "proxy/edge/peer_state.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>

namespace kf {

bool PeerClosed(int fd) {
  tcp_info info{};
  socklen_t len = sizeof(info);
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) return false;
  // CLOSE_WAIT: the peer's FIN came and we have not closed; CLOSE: reset (or never connected).
  return info.tcpi_state == TCP_CLOSE_WAIT || info.tcpi_state == TCP_CLOSE;
}

namespace {

constexpr uint8_t kApplicationData = 23;  // TLS 1.3 sends every encrypted record as this type.
constexpr size_t kHeader = 5;
constexpr size_t kAlert = 2 + 1 + 16;                // Level, description, inner type, tag.
constexpr size_t kFinishedSha256 = 4 + 32 + 1 + 16;  // Handshake header, MAC, inner type, tag.
constexpr size_t kFinishedSha384 = 4 + 48 + 1 + 16;

// The sizes of the last two encrypted records of `records` (0: none, or not encrypted); false
// when `records` do not end at a record's end.
bool LastTwo(std::string_view records, size_t* before_last, size_t* last) {
  *before_last = *last = 0;
  size_t at = 0;
  while (at < records.size()) {
    if (records.size() - at < kHeader) return false;
    const auto type = static_cast<uint8_t>(records[at]);
    const size_t length = (static_cast<size_t>(static_cast<uint8_t>(records[at + 3])) << 8) |
                          static_cast<uint8_t>(records[at + 4]);
    if (records.size() - at - kHeader < length) return false;
    *before_last = *last;
    *last = type == kApplicationData ? length : 0;
    at += kHeader + length;
  }
  return true;
}

bool FinishedSize(size_t n) { return n == kFinishedSha256 || n == kFinishedSha384; }

}  // namespace

bool EndsWithFinished(std::string_view records) {
  size_t before_last = 0;
  size_t last = 0;
  return LastTwo(records, &before_last, &last) && FinishedSize(last);
}

bool ClosedRightAfterFinished(std::string_view records) {
  size_t before_last = 0;
  size_t last = 0;
  return LastTwo(records, &before_last, &last) && FinishedSize(before_last) && last == kAlert;
}

}  // namespace kf
