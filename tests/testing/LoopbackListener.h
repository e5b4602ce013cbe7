// A listening TCP socket on a free loopback port, held for the test's
// lifetime: the kernel accepts connections and nothing answers. It stands for
// a port in use, or for a program that is not the rendezvous store (a web
// server), to the store's client, which speaks first and waits for a reply.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace gradzip::testing {

struct LoopbackListener {
  int fd = -1;
  int port = 0;  // 0 when the socket could not be opened
  LoopbackListener() {
    fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 && listen(fd, 8) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
      port = ntohs(a.sin_port);
  }
  ~LoopbackListener() { close(fd); }
  LoopbackListener(const LoopbackListener&) = delete;
  LoopbackListener& operator=(const LoopbackListener&) = delete;
};

}  // namespace gradzip::testing
