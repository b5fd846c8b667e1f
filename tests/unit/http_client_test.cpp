#include <doctest/doctest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "net/http_client.hpp"
#include "util/unique_fd.hpp"

using lk::HttpClient;
using lk::UniqueFd;
using namespace std::chrono_literals;

namespace {

// The head of the next request and its body, or "" once the client closed the connection.
std::string read_request(int fd) {
  std::string in;
  char buffer[4096];
  for (;;) {
    auto end = in.find("\r\n\r\n");
    if (end != std::string::npos) {
      std::size_t length = 0;
      if (auto at = in.find("Content-Length: "); at != std::string::npos && at < end)
        length = std::stoul(in.substr(at + 16));
      if (in.size() >= end + 4 + length) return in.substr(0, end + 4 + length);
    }
    ssize_t n = read(fd, buffer, sizeof buffer);
    if (n <= 0) return "";
    in.append(buffer, static_cast<std::size_t>(n));
  }
}

void send_text(int fd, const std::string& text) {
  CHECK(write(fd, text.data(), text.size()) == ssize_t(text.size()));
}

void reply(int fd, const std::string& body) {
  send_text(
      fd, "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body);
}

// A server on loopback that plays one script per connection it accepts, in order, on its own
// thread; it stops accepting when the scripts run out or it is destroyed.
class ScriptedServer {
 public:
  using Script = std::function<void(int fd)>;

  explicit ScriptedServer(std::vector<Script> scripts) : scripts_(std::move(scripts)) {
    listener_.reset(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in at{};
    at.sin_family = AF_INET;
    at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t size = sizeof at;
    REQUIRE(bind(listener_.get(), reinterpret_cast<sockaddr*>(&at), size) == 0);
    REQUIRE(listen(listener_.get(), 8) == 0);
    getsockname(listener_.get(), reinterpret_cast<sockaddr*>(&at), &size);
    port_ = ntohs(at.sin_port);
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    stop_read_.reset(fds[0]);
    stop_write_.reset(fds[1]);
    thread_ = std::thread([this] { serve(); });
  }
  ~ScriptedServer() {
    close(stop_write_.release());
    thread_.join();
  }

  std::string url(const std::string& host = "127.0.0.1") const {
    return "http://" + host + ":" + std::to_string(port_);
  }
  int connections() const { return accepted_; }

 private:
  void serve() {
    for (Script& script : scripts_) {
      pollfd fds[2] = {{listener_.get(), POLLIN, 0}, {stop_read_.get(), POLLIN, 0}};
      poll(fds, 2, -1);
      if (fds[1].revents) return;
      UniqueFd conn(accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
      ++accepted_;
      script(conn.get());
    }
  }

  std::vector<Script> scripts_;
  UniqueFd listener_, stop_read_, stop_write_;
  int port_ = 0;
  std::atomic<int> accepted_{0};
  std::thread thread_;
};

}  // namespace

TEST_CASE("one connection carries one request after another") {
  ScriptedServer server({[](int fd) {
    for (int i = 0; i < 3; ++i)
      reply(fd, "r" + std::to_string(i) + ":" + read_request(fd).substr(0, 6));
  }});
  // A name, looked up by the resolver (on a thread of its own); it may give ::1 first, where no
  // one listens, and then 127.0.0.1.
  HttpClient client({server.url("localhost"), "", {}});
  for (int i = 0; i < 3; ++i)
    CHECK(client.request("PUT", "/k", "v", 5s).body == "r" + std::to_string(i) + ":PUT /k");
  CHECK(server.connections() == 1);
}

TEST_CASE("a kept connection the server closes instead of answering: the request goes once more") {
  std::vector<std::string> seen;
  ScriptedServer server({[&](int fd) {
                           seen.push_back(read_request(fd));
                           reply(fd, "first");
                           seen.push_back(read_request(fd));  // and closes, unanswered
                         },
                         [&](int fd) {
                           seen.push_back(read_request(fd));
                           reply(fd, "again");
                         }});
  HttpClient client({server.url(), "", {}});
  CHECK(client.request("GET", "/a", "", 5s).body == "first");
  CHECK(client.request("GET", "/b", "", 5s).body == "again");
  REQUIRE(seen.size() == 3);
  CHECK(seen[1] == seen[2]);
  CHECK(server.connections() == 2);
}

TEST_CASE("a new connection closed without an answer is an error, not asked again") {
  ScriptedServer server({[](int fd) { read_request(fd); }, [](int fd) { reply(fd, "never"); }});
  HttpClient client({server.url(), "", {}});
  CHECK_THROWS_AS(client.request("POST", "/", "{}", 5s), lk::NetworkError);
  CHECK(server.connections() == 1);
}

TEST_CASE("no answer within the timeout is an error that says so") {
  ScriptedServer server({[](int fd) {
    read_request(fd);
    read_request(fd);  // until the client gives up and closes
  }});
  HttpClient client({server.url(), "", {}});
  auto start = std::chrono::steady_clock::now();
  try {
    client.request("GET", "/", "", 200ms);
    FAIL("no error");
  } catch (const lk::NetworkError& e) {
    CHECK(std::string(e.what()).starts_with("timed out after"));
  }
  auto took = std::chrono::steady_clock::now() - start;
  CHECK(took >= 200ms);
  CHECK(took < 5s);
}

TEST_CASE("a readable wake descriptor asks whether to go on, and a no cuts the request short") {
  ScriptedServer server({[](int fd) {
    read_request(fd);
    read_request(fd);
  }});
  int wake[2];
  REQUIRE(pipe(wake) == 0);
  UniqueFd wake_read(wake[0]), wake_write(wake[1]);
  REQUIRE(write(wake[1], "x", 1) == 1);
  int asked = 0;
  HttpClient client({server.url(), "", {}});
  auto start = std::chrono::steady_clock::now();
  auto r =
      client.request_until("GET", "/", "", 30s, {}, {wake_read.get()}, [&] { return ++asked < 3; });
  CHECK_FALSE(r);
  CHECK(asked == 3);
  CHECK(std::chrono::steady_clock::now() - start < 5s);
}

TEST_CASE("a stream's pieces arrive as they are sent, and the reader can end it") {
  ScriptedServer server({[](int fd) {
    read_request(fd);
    send_text(fd, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n");
    char byte;
    read(fd, &byte, 1);  // the client closes after "a": nothing more is sent until then
  }});
  HttpClient client({server.url(), "", {}});
  std::string got;
  long status = client.stream(
      "POST", "/watch", "{}",
      [&](std::string_view d) {
        got += d;
        return false;
      },
      {}, [] { return true; });
  CHECK(status == 200);
  CHECK(got == "a");
}

TEST_CASE("addresses that are not URLs are refused before any connection") {
  for (const char* bad : {"127.0.0.1:8500", "ftp://h", "http://", "http://h:99999", "http://[::1",
                          "http://u@h", "http://h:80\r\nX: y"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(HttpClient({bad, "", {}}), lk::Error);
  }
  CHECK_NOTHROW(HttpClient({"https://[::1]:2379/base", "", {}}));
}

TEST_CASE("a server that closes during the TLS handshake is an error that says so") {
  ScriptedServer server({[](int fd) {
    char hello[512];
    CHECK(read(fd, hello, sizeof hello) > 0);  // the ClientHello, left unanswered
  }});
  std::string url = server.url();
  HttpClient client({"https" + url.substr(4), "", {}});
  try {
    client.request("GET", "/", "", 5s);
    FAIL("no error");
  } catch (const lk::NetworkError& e) {
    CHECK(std::string(e.what()).find("TLS handshake") != std::string::npos);
  }
}
