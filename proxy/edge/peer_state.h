// Whether the client at the other end of an accepted TCP connection has already given up on it:
// the kernel's view of the connection (TCP_INFO), read without touching its bytes; and whether
// the TLS records a TLS 1.3 client sent after the server's Finished say it has, read by their
// sizes before anything decrypts them.
#ifndef KUBE_FANOUT_PROXY_EDGE_PEER_STATE_H_
#define KUBE_FANOUT_PROXY_EDGE_PEER_STATE_H_

#include <string_view>

namespace kf {

// True when the peer has closed or reset the connection on socket `fd` (its FIN or RST has
// arrived: CLOSE_WAIT, or gone entirely), whatever bytes it sent before are still unread. A
// client-go client that hit its TLS handshake timeout has closed so; one still waiting has not.
// False when the state cannot be read (then the caller goes on as if the peer were there).
bool PeerClosed(int fd);

// What a TLS 1.3 client's last flight looks like on the wire, from the records it sent after the
// server's Finished (all encrypted, each seen by its size only). A Finished takes a record of 53
// or 69 bytes of its own in Go's and OpenSSL's clients (a SHA-256 or SHA-384 MAC, the 16-byte
// tag of every TLS 1.3 cipher suite OpenSSL enables by default); an alert one of 19.
//
// True when `records` are whole records and the last is the size of a Finished: the client's
// flight is all here, with nothing after it yet.
bool EndsWithFinished(std::string_view records);
// True when `records` are whole records ending with a Finished and an alert (close_notify), each
// in a record of its own: what Go's client sends when its transport closes a connection it
// dialed and no longer needs (two first requests at once each dial; the later connection is
// closed unused). Anything the client sent after its Finished sits between the two and makes
// it false; so does a Finished packed into one record with other messages, as some clients pack
// a flight.
bool ClosedRightAfterFinished(std::string_view records);

}  // namespace kf

#endif  // KUBE_FANOUT_PROXY_EDGE_PEER_STATE_H_
