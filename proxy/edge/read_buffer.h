// ReadBuffer: where a long-lived connection's reader puts the bytes of its next read, sized to
// what arrives rather than fixed. A read waiting on a quiet connection (an idle watch, an
// HTTP/2 connection whose streams only send) holds only the small buffer inside this object;
// a large one is allocated when a read fills the small one (a burst: a request body, many
// frames) and freed as soon as a read leaves it less than full (the socket was drained, so the
// next read likely waits).
//
//   ReadBuffer<512, 64 * 1024> in;
//   for (;;) {
//     auto [ec, n] = co_await stream.async_read_some(asio::buffer(in.data(), in.size()), token);
//     ... use the n bytes at in.data() ...
//     in.Consumed(n);
//   }
//
// Used from one coroutine at a time.
#ifndef KUBE_FANOUT_EDGE_READ_BUFFER_H_
#define KUBE_FANOUT_EDGE_READ_BUFFER_H_

#include <array>
#include <cstddef>
#include <memory>

namespace kf {

template <size_t kSmall, size_t kLarge>
class ReadBuffer {
  static_assert(kSmall > 0 && kSmall < kLarge);

 public:
  // Where the next read goes: `size()` bytes at `data()`.
  char* data() { return large_ ? large_.get() : small_.data(); }
  size_t size() const { return large_ ? kLarge : kSmall; }
  // After a read of `n` bytes into data() was used: picks the next read's buffer.
  void Consumed(size_t n) {
    if (!large_) {
      if (n >= kSmall) large_ = std::make_unique_for_overwrite<char[]>(kLarge);
    } else if (n < kLarge) {
      large_.reset();
    }
  }
  bool large() const { return large_ != nullptr; }

 private:
  std::array<char, kSmall> small_;
  std::unique_ptr<char[]> large_;
};

}  // namespace kf

#endif  // KUBE_FANOUT_EDGE_READ_BUFFER_H_
