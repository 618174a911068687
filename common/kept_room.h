// ClearKeepingRoom: empties a vector that is refilled over and over (a watch's batch, its
// buffer list, an HTTP/2 stream's pieces), keeping its room for the next fill unless a burst
// grew it past `kept` elements: then the room is given back, so an idle holder keeps only the
// usual few.
#ifndef KUBE_FANOUT_COMMON_KEPT_ROOM_H_
#define KUBE_FANOUT_COMMON_KEPT_ROOM_H_

#include <cstddef>

namespace kf {

template <typename Vector>
void ClearKeepingRoom(Vector& v, size_t kept) {
  if (v.capacity() > kept) {
    Vector().swap(v);
  } else {
    v.clear();
  }
}

}  // namespace kf

#endif  // KUBE_FANOUT_COMMON_KEPT_ROOM_H_
