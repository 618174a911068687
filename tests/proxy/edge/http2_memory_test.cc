#include "proxy/edge/http2_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <vector>

namespace kf {
namespace {

// Resident pages of the `size` bytes at `ptr` (the pages they touch).
size_t ResidentPages(void* ptr, size_t size) {
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(ptr) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(ptr) + size + page - 1) / page * page;
  std::vector<unsigned char> in((end - begin) / page);
  REQUIRE(mincore(reinterpret_cast<void*>(begin), end - begin, in.data()) == 0);
  size_t n = 0;
  for (unsigned char c : in) n += c & 1;
  return n;
}

TEST_CASE("Http2Memory gives a frame buffer pages that become resident only as frames fill them",
          "[http2]") {
  constexpr size_t kFrameBuffer = 16384 + 10;  // nghttp2 1.52's, allocated at session start.
  auto* buf = static_cast<char*>(Http2Memory::Malloc(kFrameBuffer, nullptr));
  REQUIRE(buf != nullptr);
  const size_t untouched = ResidentPages(buf, kFrameBuffer);
  std::memset(buf, 'x', 200);  // A HEADERS frame.
  const size_t after_small_frame = ResidentPages(buf, kFrameBuffer);
  std::memset(buf, 'y', kFrameBuffer);  // A full DATA frame.
  const size_t after_full_frame = ResidentPages(buf, kFrameBuffer);
  Http2Memory::Free(buf, nullptr);
  CHECK(untouched <= 1);  // The header before it.
  CHECK(after_small_frame == 1);
  CHECK(after_full_frame >= 5);
}

TEST_CASE("Http2Memory zeroes calloc and keeps contents across realloc between small and paged",
          "[http2]") {
  auto* zeros = static_cast<unsigned char*>(Http2Memory::Calloc(3, 20000, nullptr));
  REQUIRE(zeros != nullptr);
  bool all_zero = true;
  for (size_t i = 0; i < 60000; ++i) all_zero = all_zero && zeros[i] == 0;
  CHECK(all_zero);
  Http2Memory::Free(zeros, nullptr);

  auto* p = static_cast<char*>(Http2Memory::Calloc(1, 100, nullptr));
  REQUIRE(p != nullptr);
  CHECK(p[99] == 0);
  std::memcpy(p, "frame", 5);
  p = static_cast<char*>(Http2Memory::Realloc(p, 40000, nullptr));  // Small to paged.
  REQUIRE(p != nullptr);
  CHECK(std::memcmp(p, "frame", 5) == 0);
  p[39999] = 'z';
  p = static_cast<char*>(Http2Memory::Realloc(p, 50, nullptr));  // Paged to small.
  REQUIRE(p != nullptr);
  CHECK(std::memcmp(p, "frame", 5) == 0);
  CHECK(Http2Memory::Realloc(p, 0, nullptr) == nullptr);  // Freed.
  Http2Memory::Free(nullptr, nullptr);
  CHECK(Http2Memory::For(nullptr).malloc == &Http2Memory::Malloc);
}

TEST_CASE("Http2Memory maps a session's frame buffer whole and gives its pages back when told",
          "[http2]") {
  constexpr size_t kFrameBuffer = 16384 + 10;
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  Http2FrameBuffer fb;
  const nghttp2_mem mem = Http2Memory::For(&fb);
  REQUIRE(mem.mem_user_data == &fb);
  void* before = mem.malloc(20000, mem.mem_user_data);  // Not claiming: a paged block of its own.
  fb.claiming = true;
  void* small = mem.malloc(100, mem.mem_user_data);  // Too small to be the frame buffer.
  auto* buf = static_cast<char*>(mem.calloc(1, kFrameBuffer, mem.mem_user_data));
  void* after = mem.malloc(20000, mem.mem_user_data);  // Claimed already: paged, not tracked.
  fb.claiming = false;
  REQUIRE(buf != nullptr);
  REQUIRE(fb.block == buf);
  CHECK(fb.bytes == kFrameBuffer);
  CHECK(reinterpret_cast<uintptr_t>(buf) % page == 0);  // No header before it.
  CHECK(ResidentPages(buf, kFrameBuffer) == 0);         // calloc wrote nothing.
  std::memset(buf, 'y', kFrameBuffer);                  // Frames filled it.
  CHECK(ResidentPages(buf, kFrameBuffer) == 5);
  CHECK(Http2Memory::Release(fb));
  CHECK(ResidentPages(buf, kFrameBuffer) == 0);
  CHECK(buf[0] == 0);  // Zeros, and usable again: the next frame makes one page resident.
  std::memcpy(buf, "frame", 5);
  CHECK(ResidentPages(buf, kFrameBuffer) == 1);
  CHECK(buf[kFrameBuffer - 1] == 0);
  // Grown, it is still the tracked block, its bytes kept.
  buf = static_cast<char*>(mem.realloc(buf, 40000, mem.mem_user_data));
  REQUIRE(buf != nullptr);
  CHECK(fb.block == buf);
  CHECK(fb.bytes == 40000);
  CHECK(std::memcmp(buf, "frame", 5) == 0);
  mem.free(buf, mem.mem_user_data);
  CHECK(fb.block == nullptr);
  CHECK_FALSE(Http2Memory::Release(fb));
  // The others were never the frame buffer, and are freed as such.
  mem.free(after, mem.mem_user_data);
  mem.free(small, mem.mem_user_data);
  mem.free(before, mem.mem_user_data);
}

}  // namespace
}  // namespace kf
