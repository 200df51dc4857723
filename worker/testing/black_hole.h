#pragma once

#include <vector>

namespace baton::worker::testing {

// A listening socket on 127.0.0.1 that never accepts, its backlog full: a connect to it
// hangs, as one to a cut-off host does. Closed on destruction. Not thread-safe.
class BlackHole {
 public:
  BlackHole();
  ~BlackHole();
  BlackHole(const BlackHole&) = delete;
  BlackHole& operator=(const BlackHole&) = delete;

  int port() const { return port_; }

 private:
  int listener_ = -1;
  int port_ = 0;
  std::vector<int> fillers_;  // Connections that fill the backlog.
};

}  // namespace baton::worker::testing
