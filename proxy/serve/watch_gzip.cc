#include "proxy/serve/watch_gzip.h"

#include "proxy/edge/gzip.h"

namespace kf {

std::optional<WatchListGzip> ParseWatchListGzip(std::string_view text) {
  if (text == "auto") return WatchListGzip::kAuto;
  if (text == "always") return WatchListGzip::kAlways;
  if (text == "never") return WatchListGzip::kNever;
  return std::nullopt;
}

bool IsWatchListRequest(const Query& q) {
  const auto bookmarks = q.First("allowWatchBookmarks");
  if (!bookmarks || ParseGoBool(*bookmarks) != true) return false;
  if (const auto initial = q.First("sendInitialEvents")) return ParseGoBool(*initial) == true;
  if (q.Has("resourceVersionMatch")) return false;  // SetListOptionsDefaults leaves it alone.
  const std::string_view rv = q.First("resourceVersion").value_or("");
  return rv.empty() || rv == "0";
}

bool CompressesWatch(const Query& q, const boost::beast::http::fields& headers, WatchListGzip mode,
                     Cacher::UpstreamWatchListGzip upstream) {
  if (mode == WatchListGzip::kNever || !IsWatchListRequest(q) || !AcceptsGzip(headers)) {
    return false;
  }
  return mode == WatchListGzip::kAlways || upstream == Cacher::UpstreamWatchListGzip::kCompresses;
}

void CompressBatch(std::span<const Piece> pieces,
                   const std::shared_ptr<const std::string>& bookmark, GzipMembers& members,
                   WatchGzipHold& hold, std::vector<boost::asio::const_buffer>& bufs) {
  const size_t count = pieces.size() + (bookmark ? 1 : 0);
  const size_t bytes = boost::asio::buffer_size(bufs);
  if (count == 0) return;
  if (count > kSharedMembersMaxPieces || bytes > kSharedMembersMaxBytes) {
    hold.member = Gzip(bufs);
    bufs.clear();
    bufs.emplace_back(hold.member.data(), hold.member.size());
    return;
  }
  std::vector<Piece> all(pieces.begin(), pieces.end());
  if (bookmark) all.push_back(Piece{bookmark, *bookmark});
  hold.kept.push_back(members.Get(all));
  bufs.clear();
  bufs.emplace_back(hold.kept.back()->data(), hold.kept.back()->size());
}

}  // namespace kf
