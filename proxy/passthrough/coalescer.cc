#include "proxy/passthrough/coalescer.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/strings.h"
#include "proxy/edge/hop_by_hop.h"
#include "proxy/edge/representation.h"

namespace kf {

std::string CoalesceKey(std::string_view method, std::string_view target,
                        const boost::beast::http::fields& fields) {
  namespace http = boost::beast::http;
  boost::beast::http::fields end_to_end;
  CopyEndToEndFields(fields, end_to_end);
  std::vector<std::pair<std::string, std::string_view>> kept;
  for (const auto& f : end_to_end) {
    switch (f.name()) {
      case http::field::host:
      case http::field::content_length:
      case http::field::user_agent:
        continue;
      default:
        break;
    }
    std::string name = absl::AsciiStrToLower(ToAbsl(f.name_string()));
    if (name == "x-forwarded-for") continue;
    kept.emplace_back(std::move(name), f.value());
  }
  std::stable_sort(kept.begin(), kept.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  // Neither a method, a target, a field name nor a field value can hold a newline.
  std::string key =
      absl::StrCat(ToAbsl(method), " ", ToAbsl(target),
                   "\npretty:", PrettyUserAgent(fields[http::field::user_agent]) ? "1" : "0");
  for (const auto& [name, value] : kept) absl::StrAppend(&key, "\n", name, ":", ToAbsl(value));
  return key;
}

Coalescer::Ticket Coalescer::Join(const std::string& key) {
  absl::MutexLock lock(&mu_);
  Entry& e = entries_[key];
  if (!e.running) {
    e.running = std::make_shared<Flight>();
    return Ticket{true, e.running, nullptr};
  }
  if (!e.next) {
    e.next = std::make_shared<Flight>();
    return Ticket{true, e.next, e.running};
  }
  return Ticket{false, e.next, nullptr};
}

void Coalescer::Start(const std::string& key, const std::shared_ptr<Flight>& flight) {
  absl::MutexLock lock(&mu_);
  Entry& e = entries_[key];
  if (e.next == flight) e.next.reset();
  e.running = flight;
}

void Coalescer::Complete(const std::string& key, const std::shared_ptr<Flight>& flight,
                         const CapturedPtr& result) {
  {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(key);
    if (it != entries_.end()) {
      if (it->second.running == flight) it->second.running.reset();
      if (it->second.next == flight) it->second.next.reset();
      if (!it->second.running && !it->second.next) entries_.erase(it);
    }
  }
  std::vector<std::function<void(CapturedPtr)>> waiters;
  {
    absl::MutexLock lock(&flight->mu);
    flight->done = true;
    flight->result = result;
    waiters.swap(flight->waiters);
  }
  for (auto& w : waiters) w(result);
}

void Coalescer::OnDone(const std::shared_ptr<Flight>& flight,
                       std::function<void(CapturedPtr)> done) {
  CapturedPtr result;
  {
    absl::MutexLock lock(&flight->mu);
    if (!flight->done) {
      flight->waiters.push_back(std::move(done));
      return;
    }
    result = flight->result;
  }
  done(result);
}

uint64_t Coalescer::coalesced() const {
  absl::MutexLock lock(&mu_);
  return coalesced_;
}

void Coalescer::CountCoalesced() {
  absl::MutexLock lock(&mu_);
  ++coalesced_;
}

}  // namespace kf
