#include "proxy/edge/http2_memory.h"

#include <sys/mman.h>
#include <unistd.h>

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

size_t PageSize() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

size_t Pages(size_t bytes) { return (bytes + PageSize() - 1) / PageSize(); }

Http2FrameBuffer* FrameBufferOf(void* user) { return static_cast<Http2FrameBuffer*>(user); }

// The session's frame buffer, when `ptr` is it.
Http2FrameBuffer* TrackedAt(void* ptr, void* user) {
  Http2FrameBuffer* fb = FrameBufferOf(user);
  return fb != nullptr && ptr != nullptr && fb->block == ptr ? fb : nullptr;
}

// Maps the frame buffer, headerless; null where the kernel refuses (malloc serves it then).
void* Claim(Http2FrameBuffer& fb, size_t size) {
  void* block = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (block == MAP_FAILED) return nullptr;
  fb.block = block;
  fb.bytes = size;
  return block;
}

}  // namespace

void* Http2Memory::Malloc(size_t size, void* user) {
  if (size > std::numeric_limits<size_t>::max() - sizeof(Header)) return nullptr;
  if (Http2FrameBuffer* fb = FrameBufferOf(user);
      fb != nullptr && fb->claiming && fb->block == nullptr && size >= kPagedBytes) {
    if (void* block = Claim(*fb, size)) return block;
  }
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

void Http2Memory::Free(void* ptr, void* user) {
  if (ptr == nullptr) return;
  if (Http2FrameBuffer* fb = TrackedAt(ptr, user)) {
    munmap(fb->block, fb->bytes);
    fb->block = nullptr;
    fb->bytes = 0;
    return;
  }
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
  if (ptr != nullptr && TrackedAt(ptr, user) == nullptr && !HeaderOf(ptr)->mapped) {
    std::memset(ptr, 0, count * size);
  }
  return ptr;
}

void* Http2Memory::Realloc(void* ptr, size_t size, void* user) {
  if (ptr == nullptr) return Malloc(size, user);
  if (size == 0) {
    Free(ptr, user);
    return nullptr;
  }
  if (Http2FrameBuffer* fb = TrackedAt(ptr, user)) {
    // Moved to a new mapping, still the session's frame buffer.
    const Http2FrameBuffer old = *fb;
    fb->block = nullptr;
    if (Claim(*fb, size) == nullptr) {
      *fb = old;
      return nullptr;
    }
    std::memcpy(fb->block, old.block, std::min(size, old.bytes));
    munmap(old.block, old.bytes);
    return fb->block;
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

nghttp2_mem Http2Memory::For(Http2FrameBuffer* frame_buffer) {
  return nghttp2_mem{frame_buffer, &Http2Memory::Malloc, &Http2Memory::Free, &Http2Memory::Calloc,
                     &Http2Memory::Realloc};
}

bool Http2Memory::Release(const Http2FrameBuffer& frame_buffer) {
  if (frame_buffer.block == nullptr) return false;
  madvise(frame_buffer.block, Pages(frame_buffer.bytes) * PageSize(), MADV_DONTNEED);
  return true;
}

}  // namespace kf
