// kf_tls_server_bench: a minimal HTTPS server on one of the TLS libraries Debian ships
// (OpenSSL, GnuTLS, wolfSSL; tls_libs.h), for tests/bench/run-handshake-bench --server LIB,
// which measures its CPU per handshake and its memory per held connection with the same client
// and certificates as it measures kube-fanout with. A program that prints numbers, not a test.
//
// One thread, blocking sockets, one connection at a time (the handshake client makes them one
// after the other): accept, the library's handshake, then HTTP/1.1 requests:
// - a client that closes right after its handshake: the connection is closed;
// - GET /heap: a JSON line of the process's heap in use (glibc's mallinfo2: bytes in use in
//   the arenas plus mmapped chunks), its VmRSS, the connections held and the handshakes made
//   and failed; the connection closes;
// - any other GET: 200 "ok"; with Connection: close the connection closes, without it the
//   connection is held (never read again) for the process's life, as an agent's kept
//   connection (run-handshake-bench starts a fresh server for each memory run).
#include <malloc.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/program_options.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "tests/bench/tls_libs.h"

namespace kf::bench {
namespace {

namespace po = boost::program_options;

struct Flags {
  std::string lib = "openssl";
  TlsFiles files;
  int port = 0;
};

struct Counts {
  int64_t handshakes = 0;
  int64_t failed = 0;
};

int64_t VmRssBytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  }
  return -1;
}

// The request head, up to 16 KiB; empty when the client closed (or failed) before one.
std::string ReadHead(TlsConnection& conn) {
  std::string head;
  char buf[4096];
  while (head.find("\r\n\r\n") == std::string::npos && head.size() < 16384) {
    long got = conn.Read(buf, sizeof buf);
    if (got <= 0) return {};
    head.append(buf, static_cast<size_t>(got));
  }
  return head;
}

std::string Answer(std::string_view body, bool close) {
  return "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: " +
         std::to_string(body.size()) + (close ? "\r\nConnection: close" : "") + "\r\n\r\n" +
         std::string(body);
}

int Listen(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd, 4096) != 0) {
    std::perror("kf_tls_server_bench: listen");
    std::exit(1);
  }
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  std::cout << "port " << ntohs(addr.sin_port) << std::endl;
  return fd;
}

void Serve(TlsLibrary& lib, int listener) {
  std::vector<std::unique_ptr<TlsConnection>> held;
  Counts counts;
  for (;;) {
    int fd = ::accept(listener, nullptr, nullptr);
    if (fd < 0) continue;
    std::string error;
    auto conn = lib.Accept(fd, &error);
    if (conn == nullptr) {
      if (++counts.failed <= 5) std::cerr << "kf_tls_server_bench: " << error << '\n';
      continue;
    }
    ++counts.handshakes;
    std::string head = ReadHead(*conn);
    if (head.empty()) continue;  // Closed after its handshake.
    if (head.rfind("GET /heap ", 0) == 0) {
      struct mallinfo2 heap = mallinfo2();
      conn->Write(Answer("{\"heap_in_use\": " + std::to_string(heap.uordblks + heap.hblkhd) +
                             ", \"vm_rss\": " + std::to_string(VmRssBytes()) +
                             ", \"held\": " + std::to_string(held.size()) +
                             ", \"handshakes\": " + std::to_string(counts.handshakes) +
                             ", \"failed\": " + std::to_string(counts.failed) + "}\n",
                         true));
    } else if (head.rfind("GET ", 0) == 0) {
      bool close = head.find("Connection: close") != std::string::npos ||
                   head.find("connection: close") != std::string::npos;
      if (conn->Write(Answer("ok", close)) && !close) held.push_back(std::move(conn));
    }
  }
}

}  // namespace
}  // namespace kf::bench

int main(int argc, char** argv) {
  using namespace kf::bench;
  Flags f;
  po::options_description d("Flags");
  // clang-format off
  d.add_options()
    ("help", "this text")
    ("lib", po::value(&f.lib)->default_value(f.lib), "openssl, gnutls or wolfssl")
    ("port", po::value(&f.port)->default_value(0), "loopback port (0: any; printed)")
    ("client-ca-file", po::value(&f.files.ca)->required(), "CA of the clients' certificates")
    ("tls-cert-file", po::value(&f.files.cert)->required(), "serving certificate (PEM)")
    ("tls-private-key-file", po::value(&f.files.key)->required(), "its key (PEM)");
  // clang-format on
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, d), vm);
    if (vm.count("help") != 0) {
      std::cout << d;
      return 0;
    }
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "kf_tls_server_bench: " << e.what() << '\n';
    return 2;
  }
  std::string error;
  std::unique_ptr<TlsLibrary> lib;
  if (f.lib == "openssl") {
    lib = MakeOpenSsl(f.files, &error);
  } else if (f.lib == "gnutls") {
    lib = MakeGnuTls(f.files, &error);
  } else if (f.lib == "wolfssl") {
    lib = MakeWolfSsl(f.files, &error);
  } else {
    error = "--lib: " + f.lib + " is not openssl, gnutls or wolfssl";
  }
  if (lib == nullptr) {
    std::cerr << "kf_tls_server_bench: " << error << '\n';
    return 1;
  }
  std::cout << "library " << lib->Version() << std::endl;
  Serve(*lib, Listen(f.port));
}
