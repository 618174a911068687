// WatchFraming: where the events of a passthrough watch stream begin and end, so kube-fanout
// can stop a watch between two events (as the apiserver does on shutdown) rather than in the
// middle of one. JSON watch streams are one event per line; protobuf ones
// (application/vnd.kubernetes.protobuf;stream=watch) are frames with a 4-byte big-endian length
// prefix. Other content types have no known framing and are treated as always at a boundary.
// The one decoder of that framing: passthrough relays stop between events with a WatchFraming
// (a value type, used by one relay on one thread), and the upstream watches the caches follow
// are cut into events by WatchFraming::Cut.
#ifndef KUBE_FANOUT_COMMON_API_WATCH_FRAMING_H_
#define KUBE_FANOUT_COMMON_API_WATCH_FRAMING_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace kf {

class WatchFraming {
 public:
  enum class Format { kJsonLines, kLengthPrefixed, kUnframed };

  // The framing implied by a response's Content-Type.
  static Format ForContentType(std::string_view content_type);

  // The event at the front of `buffer`, a stream of kJsonLines or kLengthPrefixed read from an
  // event boundary.
  struct Event {
    bool complete = false;   // All of the event is in `buffer`.
    size_t size = 0;         // Its length as far as known: a frame's declared length (0 before
                             // its prefix is whole), a line's bytes so far; for a size bound.
    std::string_view bytes;  // complete: the event, without its '\n' or its length prefix.
    size_t consumed = 0;     // complete: the bytes of `buffer` it spans.
  };
  // `scanned`: bytes at the front of `buffer` already known to hold no line end (kJsonLines),
  // so a line read in many pieces is searched once.
  static Event Cut(Format format, std::string_view buffer, size_t scanned = 0);

  explicit WatchFraming(Format format) : format_(format) {}

  // True when everything consumed so far ends exactly at an event boundary.
  bool AtBoundary() const;

  // The length of the shortest prefix of `data` (which follows what was consumed) that ends at
  // an event boundary, or npos when `data` ends inside an event.
  size_t PrefixToBoundary(std::string_view data) const;

  // Advances over bytes that were forwarded.
  void Consume(std::string_view data);

 private:
  Format format_;
  bool line_open_ = false;     // kJsonLines: bytes since the last '\n'.
  uint8_t header_bytes_ = 0;   // kLengthPrefixed: length bytes seen of the current frame (0-4).
  uint32_t length_ = 0;        // kLengthPrefixed: the current frame's length, once known.
  uint64_t payload_left_ = 0;  // kLengthPrefixed: payload bytes still to come.
};

}  // namespace kf

#endif  // KUBE_FANOUT_COMMON_API_WATCH_FRAMING_H_
