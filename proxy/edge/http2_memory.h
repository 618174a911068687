// Http2Memory: the allocator kube-fanout gives nghttp2 (nghttp2_session_server_new3). Small
// allocations go to malloc; the session's frame buffer (16 KiB and a frame header, allocated
// whole when the session starts, Debian 12's nghttp2 1.52) and anything as large gets pages of
// its own, mapped and never written by the allocator, so only the pages frames are packed into
// become resident: DATA payloads are not copied into it (Http2Stream::ReadAnswer), so a
// connection's frames there are heads and control frames, one page of the five, and a large
// head's pages stay its own instead of fragmenting the heap. One mapping per connection at its
// start and one unmapping at its end; where the kernel refuses a mapping (vm.max_map_count), malloc
// serves it instead.
//
// A session may name the block its frames are packed into (Http2FrameBuffer): that block is then
// mapped without a header, so a quiet session can give all of its pages back (Release) and hold
// none until its next frame.
//
// Stateless but for the Http2FrameBuffer a session passes (its own, used on its thread): safe
// from every thread. docs/benchmarks.md, "Memory per agent".
#ifndef KUBE_FANOUT_PROXY_EDGE_HTTP2_MEMORY_H_
#define KUBE_FANOUT_PROXY_EDGE_HTTP2_MEMORY_H_

#include <nghttp2/nghttp2.h>

#include <cstddef>

namespace kf {

// One session's frame buffer: the first paged allocation nghttp2 makes while `claiming` is set
// (nghttp2_session_server_new3 allocates nghttp2's frame buffer whole, and nothing else as large).
struct Http2FrameBuffer {
  void* block = nullptr;  // Mapped, page-aligned, no header; null until claimed, after freed.
  size_t bytes = 0;       // What nghttp2 asked for.
  bool claiming = false;  // Set around the session's creation only.
};

class Http2Memory {
 public:
  // Allocations of at least this many bytes get pages of their own.
  static constexpr size_t kPagedBytes = 16 * 1024;

  // The allocator to pass to nghttp2 for a session that tracks its frame buffer in
  // `frame_buffer` (nghttp2 copies it; `frame_buffer` must outlive the session; null: none).
  static nghttp2_mem For(Http2FrameBuffer* frame_buffer);

  // Gives the frame buffer's pages back to the kernel (they read as zeros after). Only while
  // nghttp2 holds no frame in it: between nghttp2_session_mem_send calls, once the bytes it
  // returned were copied, with nothing more to send. Returns whether there was a block.
  static bool Release(const Http2FrameBuffer& frame_buffer);

  // What nghttp2 calls (public for tests).
  static void* Malloc(size_t size, void* user);
  static void Free(void* ptr, void* user);
  static void* Calloc(size_t count, size_t size, void* user);
  static void* Realloc(void* ptr, size_t size, void* user);
};

}  // namespace kf

#endif  // KUBE_FANOUT_PROXY_EDGE_HTTP2_MEMORY_H_
