#include "proxy/serve/gzip_members.h"

#include <algorithm>

#include "proxy/edge/gzip.h"

namespace kf {

bool GzipMembers::Entry::Live() const {
  return std::none_of(owners.begin(), owners.end(),
                      [](const std::weak_ptr<const void>& o) { return o.expired(); });
}

std::shared_ptr<const std::string> GzipMembers::Get(std::span<const Piece> pieces) {
  Key key;
  key.reserve(pieces.size());
  for (const Piece& p : pieces) key.emplace_back(p.bytes.data(), p.bytes.size());
  auto [it, inserted] = map_.try_emplace(key);
  Entry& e = it->second;
  if (!inserted && e.Live()) {
    ++hits_;
    return e.member;
  }
  ++misses_;
  if (inserted) {
    order_.push_back(std::move(key));
  } else {
    bytes_ -= e.member->size();  // Other pieces at freed ones' addresses: replaced in place.
  }
  e.owners.clear();
  std::vector<boost::asio::const_buffer> bufs;
  bufs.reserve(pieces.size());
  for (const Piece& p : pieces) {
    if (p.owner) e.owners.emplace_back(p.owner);
    bufs.emplace_back(p.bytes.data(), p.bytes.size());
  }
  e.member = std::make_shared<const std::string>(Gzip(bufs));
  bytes_ += e.member->size();
  std::shared_ptr<const std::string> member = e.member;
  Evict();
  return member;
}

void GzipMembers::Evict() {
  while (!order_.empty() && (map_.size() > kMaxEntries || bytes_ > kMaxBytes)) {
    const auto it = map_.find(order_.front());
    order_.pop_front();
    if (it == map_.end()) continue;
    bytes_ -= it->second.member->size();
    map_.erase(it);
  }
}

}  // namespace kf
