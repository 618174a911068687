#include "proxy/edge/http2_memory.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>

namespace kf {
namespace {

// Each allocation starts with this header (16 bytes keep malloc's alignment): its size, to
// unmap and to copy on realloc, and how it was made.
struct alignas(16) Header {
  size_t size;
  bool mapped;
};
static_assert(sizeof(Header) == 16);

Header* HeaderOf(void* ptr) { return static_cast<Header*>(ptr) - 1; }

}  // namespace

void* Http2Memory::Malloc(size_t size, void* /*user*/) {
  if (size > std::numeric_limits<size_t>::max() - sizeof(Header)) return nullptr;
  const size_t whole = size + sizeof(Header);
  void* block = nullptr;
  bool mapped = false;
  if (size >= kPagedBytes) {
    block = mmap(nullptr, whole, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (block == MAP_FAILED) {
      block = nullptr;
    } else {
      mapped = true;
    }
  }
  if (block == nullptr) block = std::malloc(whole);
  if (block == nullptr) return nullptr;
  auto* header = new (block) Header{size, mapped};
  return header + 1;
}

void Http2Memory::Free(void* ptr, void* /*user*/) {
  if (ptr == nullptr) return;
  Header* header = HeaderOf(ptr);
  if (header->mapped) {
    munmap(header, header->size + sizeof(Header));
  } else {
    std::free(header);
  }
}

void* Http2Memory::Calloc(size_t count, size_t size, void* user) {
  if (size != 0 && count > std::numeric_limits<size_t>::max() / size) return nullptr;
  void* ptr = Malloc(count * size, user);
  // Fresh mappings read as zeros already; writing them would make every page resident.
  if (ptr != nullptr && !HeaderOf(ptr)->mapped) std::memset(ptr, 0, count * size);
  return ptr;
}

void* Http2Memory::Realloc(void* ptr, size_t size, void* user) {
  if (ptr == nullptr) return Malloc(size, user);
  if (size == 0) {
    Free(ptr, user);
    return nullptr;
  }
  Header* header = HeaderOf(ptr);
  if (!header->mapped && size < kPagedBytes) {
    void* block = std::realloc(header, size + sizeof(Header));
    if (block == nullptr) return nullptr;
    static_cast<Header*>(block)->size = size;
    return static_cast<Header*>(block) + 1;
  }
  void* moved = Malloc(size, user);
  if (moved == nullptr) return nullptr;
  std::memcpy(moved, ptr, std::min(size, header->size));
  Free(ptr, user);
  return moved;
}

nghttp2_mem* Http2Memory::Get() {
  static nghttp2_mem mem{nullptr, &Http2Memory::Malloc, &Http2Memory::Free, &Http2Memory::Calloc,
                         &Http2Memory::Realloc};
  return &mem;
}

}  // namespace kf
