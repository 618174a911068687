// One TLS server library behind one small interface, for kf_tls_server_bench: the same server
// loop measures each library's CPU per handshake and memory per held connection. Each library
// lives in its own translation unit (tls_lib_openssl.cc, tls_lib_gnutls.cc, tls_lib_wolfssl.cc)
// so their headers never meet.
//
// Every library is set up alike: TLS 1.2 and 1.3, the serving certificate and key from PEM
// files, a client certificate required and its chain verified against the CA file in the
// handshake, no session tickets (client-go offers none to resume), its defaults otherwise.
#ifndef KUBE_FANOUT_TESTS_BENCH_TLS_LIBS_H_
#define KUBE_FANOUT_TESTS_BENCH_TLS_LIBS_H_

#include <memory>
#include <string>
#include <string_view>

namespace kf::bench {

struct TlsFiles {
  std::string ca;    // CA bundle the client's certificate must chain to.
  std::string cert;  // Serving certificate (PEM).
  std::string key;   // Its key (PEM).
};

// One accepted connection after its handshake, on a blocking socket it owns.
class TlsConnection {
 public:
  virtual ~TlsConnection() = default;
  // Bytes read into `out` (up to `size`); 0 at the end of the stream (close_notify or EOF),
  // negative on an error.
  virtual long Read(char* out, size_t size) = 0;
  // false on an error.
  virtual bool Write(std::string_view bytes) = 0;
};

class TlsLibrary {
 public:
  virtual ~TlsLibrary() = default;
  virtual std::string Version() const = 0;
  // The server's handshake on `fd` (blocking); the connection owns `fd` from here on, also when
  // it fails. nullptr with `*error` set when the handshake failed.
  virtual std::unique_ptr<TlsConnection> Accept(int fd, std::string* error) = 0;
};

// nullptr with `*error` set when the library cannot be set up with `files`.
std::unique_ptr<TlsLibrary> MakeOpenSsl(const TlsFiles& files, std::string* error);
std::unique_ptr<TlsLibrary> MakeGnuTls(const TlsFiles& files, std::string* error);
std::unique_ptr<TlsLibrary> MakeWolfSsl(const TlsFiles& files, std::string* error);

}  // namespace kf::bench

#endif  // KUBE_FANOUT_TESTS_BENCH_TLS_LIBS_H_
