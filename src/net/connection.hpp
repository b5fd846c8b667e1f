#pragma once
// One connection to a server, over TCP or a unix socket, with or without TLS. Its descriptor is
// non-blocking and close-on-exec (the child runs while we talk to the server); every wait goes
// through the IoWait of the request at hand, so that our own descriptors can cut it short.
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "net/io_wait.hpp"
#include "net/tls.hpp"
#include "net/wake.hpp"
#include "util/unique_fd.hpp"

struct addrinfo;

namespace lk {

// Where a server listens, as a URL and the options named it.
struct ServerAddress {
  std::string host, port;   // for TCP
  std::string unix_socket;  // when set, instead of host and port
  bool tls = false;
  std::string tls_name;  // what the server's certificate must name
};

// The connection broke (reset, closed, or TLS failed on it) while a request was under way.
struct ConnectionLost : NetworkError {
  using NetworkError::NetworkError;
};

// A connected TCP socket to the first of `addresses` that answers; an empty one when the wait
// was cut short. Throws NetworkError with every address's reason when none answers.
UniqueFd connect_any(const addrinfo* addresses, IoWait& wait);

class Connection {
 public:
  // nullptr when the wait was cut short. Throws NetworkError when the server cannot be reached
  // or its certificate is not trusted.
  static std::unique_ptr<Connection> open(const ServerAddress& address, const TlsContext* tls,
                                          IoWait& wait);

  // False when the wait was cut short; throws ConnectionLost.
  bool write_all(std::string_view data, IoWait& wait);
  // How much was read into `buffer`, 0 once the server closed the connection, nullopt when the
  // wait was cut short; throws ConnectionLost.
  std::optional<std::size_t> read_some(char* buffer, std::size_t size, IoWait& wait);
  // Whether a kept connection can carry the next request: the server has neither closed it nor
  // sent anything unasked while it lay idle.
  bool still_open();

 private:
  Connection(UniqueFd fd, Ssl ssl) : fd_(std::move(fd)), ssl_(std::move(ssl)) {}
  // Runs an OpenSSL call to the end, waiting as it asks: its result, 0 at the close, -1 cut short.
  template <class Call>
  int tls_call(Call call, IoWait& wait, const char* what);

  UniqueFd fd_;
  Ssl ssl_;
};

}  // namespace lk
