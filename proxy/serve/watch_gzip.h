// Gzip of WatchList answers, as Kubernetes 1.37's apiserver does it (the WatchListCompression
// gate, beta and on by default from 1.37: k8s.io/apiserver/pkg/endpoints/handlers/watch.go,
// watchResponseWriter and perFlushGzipWriter): a WatchList request whose Accept-Encoding asks
// for gzip gets "Content-Encoding: gzip" and "Vary: Accept-Encoding" on its 200, and the whole
// stream (initial events, the initial-events-end bookmark, and every event after it) as gzip
// members, one per flush, each ended (gzip.Writer Flush then Close) so that every write decodes
// at once. Regular watches are never compressed.
//
// kube-fanout writes one member per written batch, as the apiserver one per flush: a large
// batch (a watch's initial state, a catch-up burst) compressed for that watcher, the usual small
// live batch (one event) taken from the thread's GzipMembers (compressed once per thread,
// however many watchers receive it). Both decode to the same bytes as the plain stream.
// Pure functions, and the per-watch hold of the compressed bytes of the batch being written.
#ifndef KUBE_FANOUT_SERVE_WATCH_GZIP_H_
#define KUBE_FANOUT_SERVE_WATCH_GZIP_H_

#include <boost/asio/buffer.hpp>
#include <boost/beast/http/fields.hpp>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cache/cacher.h"
#include "common/api/query.h"
#include "proxy/serve/gzip_members.h"

namespace kf {

// --watchlist-gzip: compress cached WatchList answers when the upstream compresses its own
// (auto: its answer to a probe, Reflector::AskWatchListGzip), always, or never.
enum class WatchListGzip : uint8_t { kAuto, kAlways, kNever };
std::optional<WatchListGzip> ParseWatchListGzip(std::string_view text);

// Whether a watch with query `q` is a WatchList request as the apiserver tells one
// (handlers/get.go's isListWatchRequest after metainternalversion.SetListOptionsDefaults): it
// sends initial events and allows bookmarks. sendInitialEvents defaults to true for a watch
// from resourceVersion "" or "0" without resourceVersionMatch (defaults.go), so such a legacy
// watch with allowWatchBookmarks=true is one too.
bool IsWatchListRequest(const Query& q);

// Whether the cached answer to a watch with `q` and `headers` is compressed: a WatchList
// request accepting gzip (edge/gzip.h's AcceptsGzip: the apiserver's ContentEncodingSupported
// reads Accept-Encoding the same way), and `mode` says so given what the upstream does.
bool CompressesWatch(const Query& q, const boost::beast::http::fields& headers, WatchListGzip mode,
                     Cacher::UpstreamWatchListGzip upstream);

// The compressed form of one batch being written: what the buffers point to until written.
struct WatchGzipHold {
  std::string member;                                    // A large batch's own member.
  std::vector<std::shared_ptr<const std::string>> kept;  // A small batch's shared member.
  void Clear() {
    member.clear();
    member.shrink_to_fit();
    kept.clear();
  }
};

// Small batches (at most this many pieces and bytes) are written as the thread's shared
// member for those pieces; larger ones as one member of their own.
inline constexpr size_t kSharedMembersMaxPieces = 16;
inline constexpr size_t kSharedMembersMaxBytes = 64 * 1024;

// Replaces `bufs` (the batch's frames `pieces`, then `bookmark` if any) by their compressed
// form, held in `hold`. `bufs` must be exactly those frames, in order.
void CompressBatch(std::span<const Piece> pieces,
                   const std::shared_ptr<const std::string>& bookmark, GzipMembers& members,
                   WatchGzipHold& hold, std::vector<boost::asio::const_buffer>& bufs);

}  // namespace kf

#endif  // KUBE_FANOUT_SERVE_WATCH_GZIP_H_
