// Whether the client at the other end of an accepted TCP connection has already given up on it:
// the kernel's view of the connection (TCP_INFO), read without touching its bytes.
#ifndef KUBE_FANOUT_PROXY_EDGE_PEER_STATE_H_
#define KUBE_FANOUT_PROXY_EDGE_PEER_STATE_H_

namespace kf {

// True when the peer has closed or reset the connection on socket `fd` (its FIN or RST has
// arrived: CLOSE_WAIT, or gone entirely), whatever bytes it sent before are still unread. A
// client-go client that hit its TLS handshake timeout has closed so; one still waiting has not.
// False when the state cannot be read (then the caller goes on as if the peer were there).
bool PeerClosed(int fd);

}  // namespace kf

#endif  // KUBE_FANOUT_PROXY_EDGE_PEER_STATE_H_
