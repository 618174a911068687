// The flags' declarations (Describe) and --help's topics: options.cc parses and checks them.
#pragma once

#include <boost/program_options.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "proxy/server/options.h"

namespace kf::flags {

// Flag values parsed after Boost (durations).
struct RawFlags {
  std::string grace, dial, bookmark, watch_idle, consistent_passthrough, cache_check;
  std::string snapshot_interval, snapshot_max_age, http2_header_block;
  std::string authn_ttl, authn_negative_ttl, authz_ttl, authz_negative_ttl;
};

// Every flag, bound to `o` (and to `raw` for those parsed after Boost).
boost::program_options::options_description Describe(ProxyOptions* o, RawFlags* raw);

// --help's topics, in order; a flag named in none is listed under "Other flags".
struct Topic {
  const char* title;
  std::vector<std::string_view> flags;
};
const std::vector<Topic>& Topics();

}  // namespace kf::flags
