//===- Rendezvous.cpp - Ranks that meet over TCP, without MPI -------------===//

#include "Rendezvous.h"

#include <fmt/format.h>

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <utility>

using namespace tfm::runtime;

namespace {

using Clock = std::chrono::steady_clock;

// What a rank sends first: who it is, and of how large a world. The magic
// tells a stray connection (a port scan, another job) from a rank.
constexpr uint32_t helloMagic = 0x74666d52; // "tfmR"
struct Hello {
  uint32_t magic;
  int32_t rank, size;
};

/// A socket that closes itself.
struct Socket {
  int fd = -1;
  Socket() = default;
  explicit Socket(int fd) : fd(fd) {}
  Socket(Socket &&o) noexcept : fd(o.fd) { o.fd = -1; }
  Socket &operator=(Socket &&o) noexcept {
    std::swap(fd, o.fd);
    return *this;
  }
  ~Socket() {
    if (fd >= 0)
      ::close(fd);
  }
};

int millisecondsLeft(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                  deadline - Clock::now())
                  .count();
  return left < 0 ? 0 : static_cast<int>(std::min<long long>(left, 1 << 30));
}

/// Waits until `fd` is ready for `events`; false at the deadline.
bool ready(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, millisecondsLeft(deadline));
    if (rc > 0)
      return true;
    if (rc == 0 || errno != EINTR)
      return false;
  }
}

/// Sends (or receives) all `bytes` at `data`; false at the deadline or
/// when the other side has gone.
bool transfer(int fd, const void *data, size_t bytes, bool sending,
              Clock::time_point deadline) {
  char *p = const_cast<char *>(static_cast<const char *>(data));
  while (bytes) {
    if (!ready(fd, sending ? POLLOUT : POLLIN, deadline))
      return false;
    ssize_t n =
        sending ? ::send(fd, p, bytes, MSG_NOSIGNAL) : ::recv(fd, p, bytes, 0);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return true;
}

bool sendAll(int fd, const void *data, size_t bytes,
             Clock::time_point deadline) {
  return transfer(fd, data, bytes, /*sending=*/true, deadline);
}

bool receiveAll(int fd, void *data, size_t bytes, Clock::time_point deadline) {
  return transfer(fd, data, bytes, /*sending=*/false, deadline);
}

/// Rank 0's answer: a status (0, or the length of an error message that
/// follows), then the bytes' length and the bytes.
bool answer(int fd, const std::string &refusal, const std::vector<char> &bytes,
            Clock::time_point deadline) {
  uint64_t head[2] = {refusal.size(), bytes.size()};
  if (!sendAll(fd, head, sizeof head, deadline))
    return false;
  return refusal.empty()
             ? sendAll(fd, bytes.data(), bytes.size(), deadline)
             : sendAll(fd, refusal.data(), refusal.size(), deadline);
}

std::string where(const RendezvousPlace &place) {
  return place.host + ":" + place.port;
}

/// A socket listening on `place.port` on every address; -1, with `error`,
/// when none can.
Socket listenOn(const RendezvousPlace &place, std::string &error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo *found = nullptr;
  if (int rc = ::getaddrinfo(nullptr, place.port.c_str(), &hints, &found)) {
    error = fmt::format("rank 0 cannot listen on port {} (TFM_RENDEZVOUS): {}",
                        place.port, ::gai_strerror(rc));
    return Socket();
  }
  Socket listener;
  int lastErrno = 0;
  // Every address family the port resolves to, IPv6 first where the
  // system lists it so, which on Linux also takes IPv4 connections.
  for (addrinfo *a = found; a && listener.fd < 0; a = a->ai_next) {
    Socket s(::socket(a->ai_family, a->ai_socktype, a->ai_protocol));
    if (s.fd < 0)
      continue;
    int one = 1;
    ::setsockopt(s.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(s.fd, a->ai_addr, a->ai_addrlen) == 0 &&
        ::listen(s.fd, place.size) == 0)
      listener = std::move(s);
    else
      lastErrno = errno;
  }
  ::freeaddrinfo(found);
  if (listener.fd < 0)
    error = fmt::format("rank 0 cannot listen on port {} (TFM_RENDEZVOUS): {}",
                        place.port, std::strerror(lastErrno));
  return listener;
}

bool serve(const RendezvousPlace &place, Socket listener,
           const std::vector<char> &bytes, Clock::time_point deadline,
           double timeoutSeconds, std::string &error, std::vector<int> *kept) {
  std::vector<Socket> ranks(place.size);
  int arrived = 1;
  std::string refusal;
  while (arrived < place.size && refusal.empty()) {
    if (!ready(listener.fd, POLLIN, deadline))
      break;
    Socket peer(::accept(listener.fd, nullptr, nullptr));
    if (peer.fd < 0)
      continue;
    Hello hello{};
    // A connection that says nothing, or not our greeting, is not a rank.
    auto greeting = std::min(deadline, Clock::now() + std::chrono::seconds(5));
    if (!receiveAll(peer.fd, &hello, sizeof hello, greeting) ||
        hello.magic != helloMagic)
      continue;
    if (hello.size != place.size)
      refusal = fmt::format("rank {} was started with TFM_WORLD_SIZE={}, "
                            "rank 0 with {}",
                            hello.rank, hello.size, place.size);
    else if (hello.rank <= 0 || hello.rank >= place.size)
      refusal = fmt::format("a process claims rank {}, which a world of {} "
                            "does not have (TFM_RANK)",
                            hello.rank, place.size);
    else if (ranks[hello.rank].fd >= 0)
      refusal =
          fmt::format("two processes claim rank {} (TFM_RANK)", hello.rank);
    if (!refusal.empty()) {
      answer(peer.fd, refusal, bytes, deadline);
      break;
    }
    ranks[hello.rank] = std::move(peer);
    ++arrived;
  }
  if (refusal.empty() && arrived < place.size) {
    std::string missing;
    for (int32_t r = 1; r < place.size; ++r)
      if (ranks[r].fd < 0)
        missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    refusal = fmt::format("rank(s) {} did not arrive at {} within {:g} s "
                          "(TFM_COLLECTIVE_TIMEOUT)",
                          missing, where(place), timeoutSeconds);
  }
  for (int32_t r = 1; r < place.size; ++r)
    if (ranks[r].fd >= 0 && !answer(ranks[r].fd, refusal, bytes, deadline) &&
        refusal.empty())
      refusal = fmt::format("rank {} left the rendezvous at {} early", r,
                            where(place));
  error = refusal;
  if (!refusal.empty())
    return false;
  if (kept) {
    kept->assign(place.size, -1);
    for (int32_t r = 1; r < place.size; ++r)
      (*kept)[r] = std::exchange(ranks[r].fd, -1);
  }
  return true;
}

bool join(const RendezvousPlace &place, std::vector<char> &bytes,
          Clock::time_point deadline, double timeoutSeconds, std::string &error,
          std::vector<int> *kept) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  std::string lastReason = "no answer";
  // Rank 0 may not be listening yet: try again until the deadline.
  for (;;) {
    addrinfo *found = nullptr;
    int rc =
        ::getaddrinfo(place.host.c_str(), place.port.c_str(), &hints, &found);
    if (rc) {
      error = fmt::format("rank {} cannot resolve {} (TFM_RENDEZVOUS): {}",
                          place.rank, where(place), ::gai_strerror(rc));
      return false;
    }
    Socket s;
    for (addrinfo *a = found; a && s.fd < 0; a = a->ai_next) {
      Socket t(::socket(a->ai_family, a->ai_socktype, a->ai_protocol));
      if (t.fd >= 0 && ::connect(t.fd, a->ai_addr, a->ai_addrlen) == 0)
        s = std::move(t);
      else
        lastReason = std::strerror(errno);
    }
    ::freeaddrinfo(found);
    if (s.fd >= 0) {
      Hello hello{helloMagic, place.rank, place.size};
      uint64_t head[2] = {0, 0};
      if (!sendAll(s.fd, &hello, sizeof hello, deadline) ||
          !receiveAll(s.fd, head, sizeof head, deadline)) {
        error = fmt::format("rank {}: rank 0 at {} did not answer within "
                            "{:g} s (TFM_COLLECTIVE_TIMEOUT)",
                            place.rank, where(place), timeoutSeconds);
        return false;
      }
      // Rank 0 sends at most a message or a unique id; more is not ours.
      if (head[0] > (1 << 16) || head[1] > (1 << 20)) {
        error = fmt::format("rank {}: {} does not speak the rendezvous",
                            place.rank, where(place));
        return false;
      }
      std::vector<char> payload(head[0] ? head[0] : head[1]);
      if (!receiveAll(s.fd, payload.data(), payload.size(), deadline)) {
        error = fmt::format("rank {}: rank 0 at {} left the rendezvous early",
                            place.rank, where(place));
        return false;
      }
      if (head[0]) {
        error = fmt::format("rank {}: rank 0 refused the rendezvous: {}",
                            place.rank,
                            std::string(payload.begin(), payload.end()));
        return false;
      }
      bytes = std::move(payload);
      if (kept)
        kept->assign(1, std::exchange(s.fd, -1));
      return true;
    }
    if (Clock::now() >= deadline) {
      error = fmt::format("rank {} found no rank 0 at {} within {:g} s "
                          "(TFM_RENDEZVOUS, TFM_COLLECTIVE_TIMEOUT): {}",
                          place.rank, where(place), timeoutSeconds, lastReason);
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

/// A whole decimal number in [low, high].
bool parseInt(const char *text, long low, long high, long &value) {
  if (!text || !*text)
    return false;
  char *end = nullptr;
  errno = 0;
  value = std::strtol(text, &end, 10);
  return errno == 0 && *end == '\0' && value >= low && value <= high;
}

} // namespace

bool tfm::runtime::rendezvousFromEnvironment(RendezvousPlace &place,
                                             std::string &error) {
  const char *rank = std::getenv("TFM_RANK"),
             *size = std::getenv("TFM_WORLD_SIZE"),
             *at = std::getenv("TFM_RENDEZVOUS");
  long r = 0, n = 0;
  if (!parseInt(size, 1, 1 << 20, n)) {
    error = size ? fmt::format("TFM_WORLD_SIZE='{}' is not a count of "
                               "processes",
                               size)
                 : "TFM_WORLD_SIZE is not set";
    return false;
  }
  if (!parseInt(rank, 0, n - 1, r)) {
    error = rank ? fmt::format("TFM_RANK='{}' is not a rank of a world of {}",
                               rank, n)
                 : "TFM_RANK is not set";
    return false;
  }
  place.rank = static_cast<int32_t>(r);
  place.size = static_cast<int32_t>(n);
  if (n == 1 && !at)
    return true; // one process meets nobody
  std::string text = at ? at : "";
  size_t colon = text.rfind(':');
  long port = 0;
  if (colon == std::string::npos || colon == 0 ||
      !parseInt(text.c_str() + colon + 1, 1, 65535, port)) {
    error = at ? fmt::format("TFM_RENDEZVOUS='{}' is not host:port", at)
               : "TFM_RENDEZVOUS is not set (host:port, where rank 0 "
                 "listens)";
    return false;
  }
  place.host = text.substr(0, colon);
  // [::1]:port spells an IPv6 address.
  if (place.host.size() > 2 && place.host.front() == '[' &&
      place.host.back() == ']')
    place.host = place.host.substr(1, place.host.size() - 2);
  place.port = text.substr(colon + 1);
  return true;
}

bool tfm::runtime::rendezvous(const RendezvousPlace &place,
                              std::vector<char> &bytes, double timeoutSeconds,
                              std::string &error,
                              std::unique_ptr<RankWatch> *watch,
                              int listening) {
  if (place.size == 1) {
    if (listening >= 0)
      ::close(listening);
    return true;
  }
  auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(timeoutSeconds));
  std::vector<int> kept;
  std::vector<int> *keep = watch ? &kept : nullptr;
  bool met;
  if (place.rank == 0) {
    Socket listener =
        listening >= 0 ? Socket(listening) : listenOn(place, error);
    met = listener.fd >= 0 && serve(place, std::move(listener), bytes, deadline,
                                    timeoutSeconds, error, keep);
  } else {
    met = join(place, bytes, deadline, timeoutSeconds, error, keep);
  }
  if (!met)
    return false;
  if (watch)
    *watch =
        std::make_unique<RankWatch>(place.rank, place.size, std::move(kept));
  return true;
}

//===- The heartbeat ------------------------------------------------------===//

namespace {

constexpr auto tellEvery = std::chrono::milliseconds(500);
/// Silence this long says a rank no longer runs (or cannot be scheduled).
constexpr auto silentAfter = 3 * tellEvery;
// A count is far below these; rank 0 marks what it relays with them. A
// rank tells rank 0 one number; rank 0 tells each rank a number per rank.
constexpr uint64_t endedMark = ~0ull, leftMark = ~0ull - 1,
                   silentBit = 1ull << 62;

} // namespace

RankWatch::RankWatch(int32_t rank, int32_t size, std::vector<int> sockets)
    : rank(rank), size(size), peers(sockets.size()), heard(size) {
  auto now = Clock::now();
  for (size_t p = 0; p < sockets.size(); ++p)
    peers[p].fd = sockets[p];
  for (Heard &h : heard)
    h.at = now;
  thread = std::thread([this] { serve(); });
}

RankWatch::~RankWatch() {
  stopping = true;
  thread.join();
  // The goodbye: this process ends its part, it did not die.
  std::vector<uint64_t> words;
  if (rank == 0) {
    std::lock_guard<std::mutex> lock(mutex);
    words.assign(size, 0);
    for (int32_t k = 1; k < size; ++k)
      words[k] = heard[k].ended  ? endedMark
                 : heard[k].left ? leftMark
                                 : heard[k].count;
    words[0] = leftMark;
  } else {
    words.assign(1, leftMark);
  }
  auto deadline = Clock::now() + std::chrono::seconds(1);
  for (Peer &peer : peers) {
    if (peer.fd < 0)
      continue;
    if (sendAll(peer.fd, peer.outbox.data(), peer.outbox.size(), deadline))
      sendAll(peer.fd, words.data(), words.size() * sizeof(uint64_t), deadline);
    ::close(peer.fd);
  }
}

void RankWatch::send(Peer &peer, const void *data, size_t bytes) {
  // A message goes whole or waits whole behind what has not gone yet, so
  // the other side never reads half of one.
  peer.outbox.append(static_cast<const char *>(data), bytes);
  while (!peer.outbox.empty()) {
    ssize_t n = ::send(peer.fd, peer.outbox.data(), peer.outbox.size(),
                       MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return; // full: later; gone: the receiving side finds out
    peer.outbox.erase(0, static_cast<size_t>(n));
  }
}

void RankWatch::closePeer(size_t p, bool died) {
  ::close(peers[p].fd);
  peers[p].fd = -1;
  Heard &h = heard[rank == 0 ? p : 0];
  if (died && !h.left)
    h.ended = true;
}

void RankWatch::receive(size_t p, Clock::time_point now) {
  Peer &peer = peers[p];
  char chunk[4096];
  bool closed = false;
  for (;;) {
    ssize_t n = ::recv(peer.fd, chunk, sizeof chunk, MSG_DONTWAIT);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      break;
    if (n <= 0) {
      closed = true;
      break;
    }
    peer.inbox.append(chunk, static_cast<size_t>(n));
  }
  size_t message = (rank == 0 ? 1 : size) * sizeof(uint64_t);
  while (peer.inbox.size() >= message) {
    std::vector<uint64_t> words(message / sizeof(uint64_t));
    std::memcpy(words.data(), peer.inbox.data(), message);
    peer.inbox.erase(0, message);
    if (rank == 0) {
      Heard &h = heard[p];
      h.at = now;
      if (words[0] == leftMark)
        h.left = true;
      else
        h.count = std::max(h.count, words[0]);
      continue;
    }
    heard[0].at = now;
    for (int32_t k = 0; k < size; ++k) {
      if (k == rank)
        continue;
      Heard &h = heard[k];
      uint64_t w = words[k];
      h.ended = h.ended || w == endedMark;
      h.left = h.left || w == leftMark;
      if (w != endedMark && w != leftMark) {
        h.count = std::max(h.count, w & ~silentBit);
        h.silent = k != 0 && (w & silentBit);
      }
    }
  }
  // Read to the end first: a goodbye comes right before the close.
  if (closed)
    closePeer(p, /*died=*/true);
}

void RankWatch::serve() {
  auto nextTell = Clock::now();
  while (!stopping) {
    auto now = Clock::now();
    std::vector<pollfd> waiting;
    std::vector<size_t> which;
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (now >= nextTell) {
        nextTell = now + tellEvery;
        if (rank == 0) {
          std::vector<uint64_t> table(size);
          table[0] = mine;
          for (int32_t k = 1; k < size; ++k) {
            const Heard &h = heard[k];
            table[k] =
                h.ended  ? endedMark
                : h.left ? leftMark
                         : h.count | (now - h.at > silentAfter ? silentBit : 0);
          }
          for (Peer &peer : peers)
            if (peer.fd >= 0)
              send(peer, table.data(), table.size() * sizeof(uint64_t));
        } else if (peers[0].fd >= 0) {
          uint64_t count = mine;
          send(peers[0], &count, sizeof count);
        }
      }
      for (size_t p = 0; p < peers.size(); ++p) {
        if (peers[p].fd < 0)
          continue;
        short events = POLLIN;
        if (!peers[p].outbox.empty())
          events |= POLLOUT;
        waiting.push_back(pollfd{peers[p].fd, events, 0});
        which.push_back(p);
      }
    }
    // A short poll, so that a watch being destroyed is not kept waiting.
    int ms = static_cast<int>(std::min<long long>(
        100, std::max<long long>(
                 0, std::chrono::duration_cast<std::chrono::milliseconds>(
                        nextTell - now)
                        .count())));
    if (waiting.empty()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
      continue;
    }
    if (::poll(waiting.data(), waiting.size(), ms) <= 0)
      continue;
    std::lock_guard<std::mutex> lock(mutex);
    now = Clock::now();
    for (size_t i = 0; i < waiting.size(); ++i) {
      size_t p = which[i];
      if (peers[p].fd < 0 || !waiting[i].revents)
        continue;
      if (waiting[i].revents & POLLOUT)
        send(peers[p], nullptr, 0);
      if (peers[p].fd >= 0 &&
          (waiting[i].revents & (POLLIN | POLLHUP | POLLERR)))
        receive(p, now);
    }
  }
}

std::string RankWatch::ended() {
  std::lock_guard<std::mutex> lock(mutex);
  std::string list;
  for (int32_t k = 0; k < size; ++k)
    if (k != rank && heard[k].ended)
      list += (list.empty() ? "" : ", ") + std::to_string(k);
  return list;
}

std::string RankWatch::lagging(bool reasons) {
  std::lock_guard<std::mutex> lock(mutex);
  auto now = Clock::now();
  uint64_t count = mine;
  std::string list;
  for (int32_t k = 0; k < size; ++k) {
    if (k == rank)
      continue;
    const Heard &h = heard[k];
    // What this rank sees itself: rank 0 hears every rank, the others
    // only rank 0, and take the rest from rank 0.
    bool direct = rank == 0 || k == 0;
    std::string why;
    if (h.ended)
      why = "its process ended";
    else if (h.left)
      why = "its process finished";
    else if (direct && now - h.at > silentAfter)
      why = fmt::format("silent for {:.0f} s",
                        std::chrono::duration<double>(now - h.at).count());
    else if (h.silent)
      why = "silent";
    else if (h.count < count)
      why = fmt::format("behind: {} collectives started to this rank's {}",
                        h.count, count);
    if (!why.empty())
      list += fmt::format("{}{}", list.empty() ? "" : ", ", k) +
              (reasons ? " (" + why + ")" : std::string());
  }
  return list;
}

int tfm::runtime::listenForRendezvous(RendezvousPlace &place,
                                      std::string &error) {
  place.port = "0";
  Socket listener = listenOn(place, error);
  if (listener.fd < 0)
    return -1;
  sockaddr_storage address{};
  socklen_t length = sizeof address;
  char host[256] = {0};
  if (::getsockname(listener.fd, reinterpret_cast<sockaddr *>(&address),
                    &length) != 0 ||
      ::gethostname(host, sizeof host - 1) != 0) {
    error = fmt::format("rank 0 cannot tell where it listens: {}",
                        std::strerror(errno));
    return -1;
  }
  uint16_t port = address.ss_family == AF_INET6
                      ? reinterpret_cast<sockaddr_in6 &>(address).sin6_port
                      : reinterpret_cast<sockaddr_in &>(address).sin_port;
  place.port = std::to_string(ntohs(port));
  place.host = host;
  return std::exchange(listener.fd, -1);
}

double tfm::runtime::collectiveTimeout(double fallback) {
  if (const char *t = std::getenv("TFM_COLLECTIVE_TIMEOUT")) {
    char *end = nullptr;
    double v = std::strtod(t, &end);
    if (end != t && *end == '\0' && v > 0)
      return v;
  }
  return fallback;
}
