#include "proxy/server/heap_trim.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace kf {
namespace {

constexpr int64_t kMiB = 1 << 20;

}  // namespace

TEST_CASE(
    "HeapTrimmer trims once the heap's free bytes have grown 8 MiB past their lowest, and counts "
    "it") {
  HeapTrimmer::Sample now{100 * kMiB, 60 * kMiB, 2 * kMiB};
  int trims = 0;
  HeapTrimmer trimmer([&] { return now; },
                      [&] {
                        ++trims;
                        now.resident -= 30 * kMiB;  // Pages go, the bytes stay free.
                      });
  CHECK_FALSE(trimmer.Check().trimmed);  // 2 MiB free: under the threshold from none.
  now.free += 5 * kMiB;                  // 7: not yet.
  CHECK_FALSE(trimmer.Check().trimmed);
  now.resident += 50 * kMiB;  // Memory outside the heap (mapped buffers) does not count.
  CHECK_FALSE(trimmer.Check().trimmed);
  now.free += 1 * kMiB;  // 8: 8 MiB past none.
  const HeapTrimmer::Result r = trimmer.Check();
  REQUIRE(r.trimmed);
  CHECK(trims == 1);
  CHECK(r.before.resident - r.after.resident == 30 * kMiB);
  // The floor is now the free bytes after the trim (8 MiB): a drop lowers it, growth from it
  // trims again.
  CHECK_FALSE(trimmer.Check().trimmed);
  now.free -= 4 * kMiB;  // 4.
  CHECK_FALSE(trimmer.Check().trimmed);
  now.free += 11 * kMiB;  // 15: 11 past 4.
  CHECK(trimmer.Check().trimmed);
  CHECK(trims == 2);

  metrics::Writer w;
  trimmer.Render(w);
  const std::string text = w.Take();
  CHECK(text.find("kube_fanout_heap_trims_total 2\n") != std::string::npos);
  CHECK(text.find("kube_fanout_heap_trim_released_bytes_total 62914560\n") != std::string::npos);
  CHECK(text.find("kube_fanout_heap_free_bytes 15728640\n") != std::string::npos);
}

TEST_CASE(
    "HeapTrimmer gives a fragmented heap's free pages back: the process's resident memory "
    "drops") {
  HeapTrimmer trimmer;
  (void)trimmer.Check();  // Whatever the test process has free goes first.
  // A burst: 64 MiB in 16 KiB blocks, touched, then freed but for every 16th, which keeps the
  // freed runs between them from the arena's top, so malloc cannot shrink the heap by itself.
  constexpr size_t kBlock = 16 * 1024;
  std::vector<char*> blocks;
  for (int i = 0; i < 4096; ++i) {
    auto* b = static_cast<char*>(std::malloc(kBlock));
    REQUIRE(b != nullptr);
    std::memset(b, i, kBlock);
    blocks.push_back(b);
  }
  for (size_t i = 0; i < blocks.size(); ++i) {
    if (i % 16 != 0) {
      std::free(blocks[i]);
      blocks[i] = nullptr;
    }
  }
  const HeapTrimmer::Result r = trimmer.Check();
  INFO("resident before " << r.before.resident << ", after " << r.after.resident << ", in use "
                          << r.before.in_use);
  REQUIRE(r.trimmed);
  CHECK(r.before.resident - r.after.resident > 32 * kMiB);
  for (char* b : blocks) std::free(b);
}

}  // namespace kf
