#include "net/connection.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <thread>

namespace lk {
namespace {

std::string system_error(const std::string& what, int err) {
  return what + ": " + std::strerror(err);
}

// A connected socket; an empty one when the wait was cut short. Throws with errno's reason.
UniqueFd connect_socket(int family, const sockaddr* to, socklen_t length, IoWait& wait) {
  UniqueFd fd(socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) throw NetworkError(system_error("socket", errno));
  if (connect(fd.get(), to, length) == 0) return fd;
  if (errno != EINPROGRESS) throw NetworkError(std::strerror(errno));
  if (!wait.ready(fd.get(), POLLOUT)) return {};
  int err = 0;
  socklen_t size = sizeof err;
  getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &size);
  if (err != 0) throw NetworkError(std::strerror(err));
  return fd;
}

UniqueFd connect_unix(const std::string& path, IoWait& wait) {
  sockaddr_un to{};
  to.sun_family = AF_UNIX;
  if (path.size() >= sizeof to.sun_path)
    throw NetworkError("the socket path " + path + " is too long");
  std::memcpy(to.sun_path, path.data(), path.size());
  try {
    return connect_socket(AF_UNIX, reinterpret_cast<sockaddr*>(&to), sizeof to, wait);
  } catch (const NetworkError& e) {
    throw NetworkError("cannot connect to " + path + ": " + e.what());
  }
}

// A host's addresses, as the resolver orders them.
struct Lookup {
  std::string host, port;
  std::atomic<bool> finished{false};
  int rc = 0;
  addrinfo* found = nullptr;
  UniqueFd done;  // written by the resolver's thread, when there is one
  ~Lookup() {
    if (found) freeaddrinfo(found);
  }

  int run(int flags) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = flags;
    return getaddrinfo(host.c_str(), port.c_str(), &hints, &found);
  }
};

// nullptr when the wait was cut short. An address in numbers needs no resolver; a name is looked
// up on a thread of its own, so that a resolver that does not answer keeps to the request's
// deadline and our descriptors still cut the wait short (the thread then ends by itself).
std::shared_ptr<Lookup> resolve(const std::string& host, const std::string& port, IoWait& wait) {
  auto lookup = std::make_shared<Lookup>();
  lookup->host = host;
  lookup->port = port;
  lookup->rc = lookup->run(AI_NUMERICHOST);
  if (lookup->rc == EAI_NONAME) {
    lookup->done.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!lookup->done) throw NetworkError(system_error("eventfd", errno));
    std::thread([lookup] {
      lookup->rc = lookup->run(0);
      lookup->finished.store(true, std::memory_order_release);
      std::uint64_t one = 1;
      (void)!write(lookup->done.get(), &one, sizeof one);
    }).detach();
    while (!lookup->finished.load(std::memory_order_acquire))
      if (!wait.ready(lookup->done.get(), POLLIN)) return nullptr;
  }
  if (lookup->rc != 0)
    throw NetworkError("cannot resolve " + host + ": " + gai_strerror(lookup->rc));
  return lookup;
}

std::string numeric_host(const addrinfo* a) {
  char host[NI_MAXHOST];
  if (getnameinfo(a->ai_addr, a->ai_addrlen, host, sizeof host, nullptr, 0, NI_NUMERICHOST) != 0)
    return "?";
  return host;
}

// As Go's dialer does: every address but the last gets an even share of the time left, and at
// least 2 s, so that one that drops packets (an IPv6 route that leads nowhere, say) cannot use up
// the whole request before the next is tried.
Deadline share_of(const Deadline& whole, int addresses_left) {
  if (addresses_left <= 1 || whole.is_never()) return whole;
  auto left = whole.left(std::chrono::milliseconds::max());
  auto share = std::max<std::chrono::milliseconds>(left / addresses_left, std::chrono::seconds(2));
  return Deadline::earlier(whole, Deadline::after(share));
}

UniqueFd connect_tcp(const std::string& host, const std::string& port, IoWait& wait) {
  auto lookup = resolve(host, port, wait);
  if (!lookup) return {};
  try {
    return connect_any(lookup->found, wait);
  } catch (const NetworkError& e) {
    throw NetworkError("cannot connect to " + host + " port " + port + ": " + e.what());
  }
}

}  // namespace

UniqueFd connect_any(const addrinfo* addresses, IoWait& wait) {
  int left = 0;
  for (const addrinfo* a = addresses; a; a = a->ai_next) ++left;
  struct Restore {  // the request's own deadline, once the connection is made or not
    IoWait& wait;
    Deadline whole;
    ~Restore() { wait.set_deadline(whole); }
  } restore{wait, wait.deadline()};
  std::string why;
  for (const addrinfo* a = addresses; a && !restore.whole.passed(); a = a->ai_next, --left) {
    wait.set_deadline(share_of(restore.whole, left));
    try {
      UniqueFd fd = connect_socket(a->ai_family, a->ai_addr, a->ai_addrlen, wait);
      if (fd) {
        int on = 1, idle = 60, interval = 60;  // requests are small and each waits for its answer
        setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
        // A watch is silent for as long as nothing changes: a connection that died without a
        // word (a NAT forgot it) is found by probes after a minute, not the kernel's two hours.
        setsockopt(fd.get(), SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
        setsockopt(fd.get(), IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
        setsockopt(fd.get(), IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
      }
      return fd;
    } catch (const NetworkError& e) {
      // Every address's reason, named when there are several: the first may be the telling one.
      why +=
          (why.empty() ? "" : "; ") + (addresses->ai_next ? numeric_host(a) + ": " : "") + e.what();
    }
  }
  throw NetworkError(why.empty() ? "timed out" : why);
}

namespace {

// OpenSSL writes with write(2), which raises SIGPIPE on a connection the server reset. A run
// ignores SIGPIPE, `-status` does not: the signal is held back in this thread while OpenSSL works,
// and one raised meanwhile is taken off again.
class SigpipeHeld {
 public:
  SigpipeHeld() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE);
  }
  ~SigpipeHeld() {
    sigset_t pending;
    sigpending(&pending);
    if (!was_pending_ && sigismember(&pending, SIGPIPE)) {
      timespec now{};
      sigtimedwait(&pipe_, nullptr, &now);
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SigpipeHeld(const SigpipeHeld&) = delete;
  SigpipeHeld& operator=(const SigpipeHeld&) = delete;

 private:
  sigset_t pipe_, old_;
  bool was_pending_;
};

}  // namespace

template <class Call>
int Connection::tls_call(Call call, IoWait& wait, const char* what) {
  SigpipeHeld held;
  for (;;) {
    ERR_clear_error();
    errno = 0;
    int n = call();
    if (n > 0) return n;
    switch (SSL_get_error(ssl_.get(), n)) {
      case SSL_ERROR_WANT_READ:
        if (!wait.ready(fd_.get(), POLLIN)) return -1;
        break;
      case SSL_ERROR_WANT_WRITE:
        if (!wait.ready(fd_.get(), POLLOUT)) return -1;
        break;
      case SSL_ERROR_ZERO_RETURN: return 0;
      case SSL_ERROR_SYSCALL:
        throw ConnectionLost(errno ? system_error(what, errno) : tls_error(what));
      default: throw ConnectionLost(tls_error(what));
    }
  }
}

std::unique_ptr<Connection> Connection::open(const ServerAddress& address, const TlsContext* tls,
                                             IoWait& wait) {
  UniqueFd fd = address.unix_socket.empty() ? connect_tcp(address.host, address.port, wait)
                                            : connect_unix(address.unix_socket, wait);
  if (!fd) return nullptr;
  if (!address.tls) return std::unique_ptr<Connection>(new Connection(std::move(fd), nullptr));
  Ssl ssl = tls->session(fd.get(), address.tls_name);
  std::unique_ptr<Connection> c(new Connection(std::move(fd), std::move(ssl)));
  try {
    int done = c->tls_call([&] { return SSL_do_handshake(c->ssl_.get()); }, wait, "TLS handshake");
    if (done < 0) return nullptr;
    if (done == 0)
      throw ConnectionLost("the server closed the connection during the TLS handshake");
  } catch (const ConnectionLost& e) {
    long verified = SSL_get_verify_result(c->ssl_.get());
    if (verified != X509_V_OK)
      throw NetworkError("the server's certificate is not trusted: " +
                         std::string(X509_verify_cert_error_string(verified)));
    throw NetworkError(e.what());
  }
  return c;
}

bool Connection::write_all(std::string_view data, IoWait& wait) {
  while (!data.empty()) {
    long n;
    if (ssl_) {
      int size = static_cast<int>(std::min<std::size_t>(data.size(), 1 << 30));
      n = tls_call([&] { return SSL_write(ssl_.get(), data.data(), size); }, wait, "TLS write");
      if (n == 0) throw ConnectionLost("the server closed the connection");
    } else {
      n = send(fd_.get(), data.data(), data.size(), MSG_NOSIGNAL);
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        if (errno == EAGAIN && !wait.ready(fd_.get(), POLLOUT)) return false;
        continue;
      }
      if (n < 0) throw ConnectionLost(system_error("send", errno));
    }
    if (n < 0) return false;
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

std::optional<std::size_t> Connection::read_some(char* buffer, std::size_t size, IoWait& wait) {
  if (ssl_) {
    int n = tls_call([&] { return SSL_read(ssl_.get(), buffer, static_cast<int>(size)); }, wait,
                     "TLS read");
    if (n < 0) return std::nullopt;
    return static_cast<std::size_t>(n);
  }
  for (;;) {
    ssize_t n = recv(fd_.get(), buffer, size, 0);
    if (n >= 0) return static_cast<std::size_t>(n);
    if (errno == EINTR) continue;
    if (errno != EAGAIN) throw ConnectionLost(system_error("recv", errno));
    if (!wait.ready(fd_.get(), POLLIN)) return std::nullopt;
  }
}

bool Connection::still_open() {
  pollfd p{fd_.get(), POLLIN, 0};
  if (poll(&p, 1, 0) == 0) return true;  // nothing came: neither a close nor anything else
  if (!ssl_) return false;
  // TLS may have sent records of its own (session tickets): those leave it usable.
  char byte;
  ERR_clear_error();
  int n = SSL_peek(ssl_.get(), &byte, 1);
  bool usable = n <= 0 && SSL_get_error(ssl_.get(), n) == SSL_ERROR_WANT_READ;
  ERR_clear_error();
  return usable;
}

}  // namespace lk
