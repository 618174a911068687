// Http2Memory: the allocator kube-fanout gives nghttp2 (nghttp2_session_server_new3). Small
// allocations go to malloc; the session's frame buffer (16 KiB and a frame header, allocated
// whole when the session starts, Debian 12's nghttp2 1.52) and anything as large gets pages of
// its own, mapped and never written by the allocator, so only the pages frames are packed into
// become resident: a connection whose frames stay small (a node agent's watches: a few KiB)
// holds one or two of them instead of five, and a burst's pages stay its own instead of
// fragmenting the heap. One mapping per connection at its start and one unmapping at its end;
// where the kernel refuses a mapping (vm.max_map_count), malloc serves it instead.
//
// Stateless: safe from every thread. docs/benchmarks.md, "Memory per agent".
#ifndef KUBE_FANOUT_PROXY_EDGE_HTTP2_MEMORY_H_
#define KUBE_FANOUT_PROXY_EDGE_HTTP2_MEMORY_H_

#include <nghttp2/nghttp2.h>

#include <cstddef>

namespace kf {

class Http2Memory {
 public:
  // Allocations of at least this many bytes get pages of their own.
  static constexpr size_t kPagedBytes = 16 * 1024;

  // The allocator to pass to nghttp2; lives for the process.
  static nghttp2_mem* Get();

  // What nghttp2 calls (public for tests).
  static void* Malloc(size_t size, void* user);
  static void Free(void* ptr, void* user);
  static void* Calloc(size_t count, size_t size, void* user);
  static void* Realloc(void* ptr, size_t size, void* user);
};

}  // namespace kf

#endif  // KUBE_FANOUT_PROXY_EDGE_HTTP2_MEMORY_H_
