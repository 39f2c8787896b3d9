// Stream socket pairs (the kernel's AF_UNIX SOCK_STREAM). See socket.cc.
#ifndef UEPOLL_SRC_SOURCES_SOCKET_H_
#define UEPOLL_SRC_SOURCES_SOCKET_H_

namespace uepoll::impl {

// uepoll_socketpair: 0 or -errno.
int CreateSocketPair(int domain, int type, int protocol, int sv[2]);

}  // namespace uepoll::impl

#endif  // UEPOLL_SRC_SOURCES_SOCKET_H_
