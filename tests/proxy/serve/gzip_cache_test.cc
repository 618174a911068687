#include "proxy/serve/gzip_cache.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <thread>

#include "absl/synchronization/notification.h"

namespace kf::test {
namespace {

// A stand-in compressor: counts its calls and returns `size` bytes named after the key.
struct Compressor {
  std::string operator()(const std::string& key, size_t size) {
    ++calls;
    std::string out = key + ":";
    out.resize(size, 'z');
    return out;
  }
  std::atomic<int> calls{0};
};

TEST_CASE("GzipCache compresses an identity once and shares the bytes with later askers") {
  GzipCache cache(1 << 20);
  Compressor c;
  const auto first = cache.Get("pods rv=7", [&] { return c("pods rv=7", 1000); });
  const auto second = cache.Get("pods rv=7", [&] { return c("pods rv=7", 1000); });
  REQUIRE(first != nullptr);
  CHECK(second.get() == first.get());  // The same bytes, not a copy.
  CHECK(c.calls == 1);
  // Another identity (the next RV) is another answer.
  const auto next = cache.Get("pods rv=8", [&] { return c("pods rv=8", 1000); });
  CHECK(next.get() != first.get());
  CHECK(next->starts_with("pods rv=8:"));
  CHECK(c.calls == 2);
  const GzipCache::Stats s = cache.GetStats();
  CHECK(s.shared == 1);
  CHECK(s.compressed == 2);
  CHECK(s.entries == 2);
  CHECK(s.bytes == 2 * (9 + 1000));
}

TEST_CASE("GzipCache evicts the least recently used past its bytes, keys counted") {
  // Room for three entries of a 1-byte key and 1,000 bytes.
  GzipCache cache(3 * 1001);
  Compressor c;
  const auto get = [&](const std::string& key) {
    return cache.Get(key, [&] { return c(key, 1000); });
  };
  get("a");
  get("b");
  get("c");
  CHECK(c.calls == 3);
  get("a");  // Now "b" is the least recently used.
  CHECK(c.calls == 3);
  get("d");
  CHECK(c.calls == 4);
  GzipCache::Stats s = cache.GetStats();
  CHECK(s.evicted == 1);
  CHECK(s.entries == 3);
  CHECK(s.bytes == 3 * 1001);
  get("a");
  get("c");
  get("d");
  CHECK(c.calls == 4);  // Kept.
  get("b");
  CHECK(c.calls == 5);  // Evicted: compressed again (and "a", now oldest, goes).
  // A key that makes an entry too large for the whole bound: compressed, not kept.
  const std::string long_key(3 * 1001, 'k');
  const auto once = cache.Get(long_key, [&] { return c(long_key, 1); });
  const auto again = cache.Get(long_key, [&] { return c(long_key, 1); });
  CHECK(c.calls == 7);
  CHECK(*once == *again);
  s = cache.GetStats();
  CHECK(s.entries == 3);
  CHECK(s.bytes <= 3 * 1001);
}

TEST_CASE("GzipCache with no bytes keeps nothing") {
  GzipCache cache(0);
  Compressor c;
  cache.Get("a", [&] { return c("a", 10); });
  cache.Get("a", [&] { return c("a", 10); });
  CHECK(c.calls == 2);
  CHECK(cache.GetStats().entries == 0);
}

// A compression of "pods rv=9" under way on its own thread, held until Release().
struct HeldCompression {
  HeldCompression(GzipCache& cache, Compressor& c)
      : thread([&] {
          bytes = cache.Get("pods rv=9", [&] {
            started.Notify();
            release.WaitForNotification();
            return c("pods rv=9", 100);
          });
        }) {
    started.WaitForNotification();
  }
  void Release() {
    release.Notify();
    thread.join();
  }
  absl::Notification started, release;
  GzipCache::Bytes bytes;
  std::thread thread;  // Last: started once the rest is built.
};

TEST_CASE("GzipCache makes an asker of an identity being compressed wait for those bytes") {
  GzipCache cache(1 << 20);
  Compressor c;
  HeldCompression compressing(cache, c);
  GzipCache::Bytes second;
  std::atomic<bool> got{false};
  std::thread waiting([&] {
    second = cache.Get("pods rv=9", [&] { return c("pods rv=9", 100); });
    got = true;
  });
  // The second asker does not compress meanwhile, and has no answer before the first is done.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK_FALSE(got.load());
  CHECK(c.calls == 0);
  compressing.Release();
  waiting.join();
  REQUIRE(compressing.bytes != nullptr);
  CHECK(second.get() == compressing.bytes.get());
  CHECK(c.calls == 1);
  CHECK(cache.GetStats().shared == 1);
}

TEST_CASE("GzipCache lets an asker that must not wait compress beside the one compressing") {
  GzipCache cache(1 << 20);
  Compressor c;
  HeldCompression compressing(cache, c);
  // An I/O thread (no list pool) compresses its own copy at once instead of blocking.
  const auto own = cache.Get(
      "pods rv=9", [&] { return c("pods rv=9", 100); }, /*wait=*/false);
  REQUIRE(own != nullptr);
  CHECK(c.calls == 1);
  // Its copy is kept; the first finishes later and does not add a second entry.
  compressing.Release();
  REQUIRE(compressing.bytes != nullptr);
  CHECK(*compressing.bytes == *own);
  CHECK(c.calls == 2);
  const GzipCache::Stats s = cache.GetStats();
  CHECK(s.entries == 1);
  CHECK(s.bytes == 9 + 100);
  // And later askers share the kept bytes.
  CHECK(cache.Get("pods rv=9", [&] { return c("pods rv=9", 100); }).get() == own.get());
  CHECK(c.calls == 2);
}

}  // namespace
}  // namespace kf::test
