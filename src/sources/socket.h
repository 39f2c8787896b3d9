// AF_UNIX socket pairs (stream, datagram, seqpacket). See unix_common.h.
#ifndef UEPOLL_SRC_SOURCES_SOCKET_H_
#define UEPOLL_SRC_SOURCES_SOCKET_H_

namespace uepoll::impl {

// uepoll_socketpair: 0 or -errno.
int CreateSocketPair(int domain, int type, int protocol, int sv[2]);

}  // namespace uepoll::impl

#endif  // UEPOLL_SRC_SOURCES_SOCKET_H_
