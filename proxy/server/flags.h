// The flags' declarations (Describe) and --help's topics: options.cc parses and checks them.
#pragma once

#include <boost/program_options.hpp>
#include <string>
#include <vector>

#include "proxy/server/options.h"

namespace kf::flags {

// Flag values parsed after Boost (durations).
struct RawFlags {
  std::string grace, shutdown_delay, watch_termination, dial, bookmark, watch_idle,
      consistent_passthrough, cache_check;
  std::string snapshot_interval, snapshot_max_age, http2_header_block, request_timeout,
      http2_frame_buffer_release, heap_trim;
  std::string authn_ttl, authn_negative_ttl, authz_ttl, authz_negative_ttl;
};

// Every flag, bound to `o` (and to `raw` for those parsed after Boost).
boost::program_options::options_description Describe(ProxyOptions* o, RawFlags* raw);

// Declares a group of flags on `d`, bound to `o` (and to `raw` for those parsed after Boost).
using DeclareFlags = void (*)(boost::program_options::options_description& d, ProxyOptions* o,
                              RawFlags* raw);

// --help's topics, in order: each a title and the functions that declare its flags (so a flag
// is named once, where it is declared, and belongs to exactly one topic).
struct Topic {
  const char* title;
  std::vector<DeclareFlags> declare;
};
const std::vector<Topic>& Topics();

}  // namespace kf::flags
