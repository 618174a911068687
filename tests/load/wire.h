// Small pure helpers for the load agents' requests and the watch events they read: query
// strings spelled as client-go spells them, the resourceVersion and error code of one watch
// event line, and the reflector's retry delay.
#ifndef KUBE_FANOUT_TESTS_LOAD_WIRE_H_
#define KUBE_FANOUT_TESTS_LOAD_WIRE_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kf::load {

// Go's url.QueryEscape: unreserved characters stay, space becomes '+', the rest %XX.
std::string QueryEscape(std::string_view s);

// "?k1=v1&k2=v2" with the keys sorted and the values escaped, like url.Values.Encode (which
// client-go uses, so the apiserver and kube-fanout see the parameters in that order). Pairs
// with an empty value are left out. Empty when no pair remains.
std::string Query(std::vector<std::pair<std::string_view, std::string>> params);

// The decimal resourceVersion in the object's metadata of a watch event line
// ({"type":"MODIFIED","object":{...,"metadata":{...,"resourceVersion":"123",...}}}); it comes
// before any nested object in metadata, so the first one after "metadata":{ is the object's.
std::optional<uint64_t> EventResourceVersion(std::string_view line);

// The "code" of the Status in an ERROR event line; 410 also when only the reason says Expired or
// Gone (some servers leave the code out).
std::optional<int> EventErrorCode(std::string_view line);

// The delay before retry number `attempt` (0 for the first): 800 ms doubling up to 30 s, then
// stretched by 1 + jitter (jitter in [0, 1)), so at most 60 s; like client-go's reflector
// backoff, which also spreads retries of many clients that failed together.
std::chrono::milliseconds BackoffDelay(int attempt, double jitter);

}  // namespace kf::load

#endif  // KUBE_FANOUT_TESTS_LOAD_WIRE_H_
