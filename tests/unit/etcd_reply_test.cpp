#include <doctest/doctest.h>

#include <algorithm>

#include "backend/etcd/etcd_reply.hpp"
#include "util/base64.hpp"

using namespace lk;
using nlohmann::json;

namespace {

std::string b64(const std::string& s) { return base64_encode(s); }

// What decoding `body` throws, or "" when it does not.
template <class F>
std::string error_of(F&& decode) {
  try {
    decode();
  } catch (const MalformedReply& e) {
    return e.what();
  }
  return "";
}

const std::string kKey = "jobs/a/694d7c3e5a1b2c0d";
constexpr std::int64_t kLease = 0x694d7c3e5a1b2c0d;

json kv(const std::string& key, std::int64_t create_revision, std::int64_t lease = kLease) {
  json out = {{"key", b64(key)}, {"mod_revision", std::to_string(create_revision)}};
  if (create_revision) out["create_revision"] = std::to_string(create_revision);
  if (lease) out["lease"] = std::to_string(lease);
  return out;
}

json header(std::int64_t revision) { return {{"revision", std::to_string(revision)}}; }

// The queueing transaction's reply: the put when it `succeeded`, then the read of the queue,
// given oldest first and sent newest first, as it was asked for.
std::string txn(bool succeeded, std::int64_t revision, json queue) {
  std::reverse(queue.begin(), queue.end());
  json reply = {{"header", header(revision)}};
  json read = {{"response_range", {{"header", header(revision)}, {"kvs", queue}}}};
  if (succeeded) {
    reply["succeeded"] = true;
    reply["responses"] = {{{"response_put", {{"header", header(revision)}}}}, read};
  } else {
    reply["responses"] = {read};
  }
  return reply.dump();
}

QueuedKey queued(const std::string& body) {
  return decode_queue_txn(body, kKey, kLease, "jobs/a/", "jobs/a0");
}

}  // namespace

TEST_CASE("numbers: decimal int64 only, as the gateway writes them; never a library's exception") {
  CHECK(parse_int64("12") == 12);
  CHECK(parse_int64("-3") == -3);
  CHECK(parse_int64("9223372036854775807") == INT64_MAX);
  for (const char* bad : {"", "+1", " 1", "1 ", "1a", "0x10", "9223372036854775808", "-", "1e3"})
    CHECK_MESSAGE(!parse_int64(bad), bad);

  json o = {{"s", "42"},
            {"n", 7},
            {"neg", "-5"},
            {"bad", "4x"},
            {"b", true},
            {"f", 1.5},
            {"huge", 18446744073709551615ull}};
  CHECK(etcd_int(o, "s") == 42);
  CHECK(etcd_int(o, "n") == 7);
  CHECK(etcd_int(o, "missing") == 0);  // zero values are left out
  CHECK(error_of([&] { etcd_int(o, "bad"); }) == "bad is not a whole number");
  CHECK(error_of([&] { etcd_int(o, "b"); }) == "b is not a whole number");
  CHECK(error_of([&] { etcd_int(o, "f"); }) == "f is not a whole number");
  CHECK(error_of([&] { etcd_int(o, "huge"); }) == "huge is out of range");
  CHECK(etcd_positive(o, "s") == 42);
  CHECK(error_of([&] { etcd_positive(o, "missing"); }) == "missing missing or 0");
  CHECK(error_of([&] { etcd_positive(o, "neg"); }) == "neg is negative (-5)");
}

TEST_CASE("failed calls: gRPC code and message from the body, or the body itself") {
  EtcdStatus s = decode_status(
      R"({"error":"etcdserver: requested lease not found","message":"etcdserver: requested lease not found","code":5})");
  CHECK(s.code == 5);
  CHECK(s.message == "etcdserver: requested lease not found");
  s = decode_status("<html>\nBad Gateway</html>");
  CHECK(s.code == 0);
  CHECK(s.message == "<html>\\nBad Gateway</html>");
  CHECK(decode_status("").message == "");
  CHECK(decode_status(R"({"error":{"grpc_code":"x","message":[]}})").message ==
        "");  // never throws
  s = decode_status(R"({"error":{"grpc_code":14,"message":"etcdserver: no leader"}})");
  CHECK(s.code == 14);
  CHECK(s.message == "etcdserver: no leader");
}

TEST_CASE("lease grant: an ID and a TTL above 0, nothing else") {
  LeaseGrant g =
      decode_lease_grant(R"({"header":{"revision":"1"},"ID":"4111120225994888709","TTL":"10"})");
  CHECK(g.id == 4111120225994888709);
  CHECK(g.ttl == 10);
  CHECK(error_of([] {
          decode_lease_grant(R"({"header":{"revision":"1"},"ID":"-7","TTL":"10"})");
        }) == "ID is negative (-7)");
  CHECK(error_of([] { decode_lease_grant(R"({"header":{"revision":"1"},"TTL":"10"})"); }) ==
        "ID missing or 0");
  CHECK(error_of([] { decode_lease_grant(R"({"header":{"revision":"1"},"ID":"5"})"); }) ==
        "TTL missing or 0");
  CHECK(error_of([] { decode_lease_grant(R"({"ID":"5","TTL":"10"})"); }) ==
        "revision missing or 0");
  CHECK(error_of([] {
          decode_lease_grant(
              R"({"header":{"revision":"1"},"ID":"5","TTL":"10","error":"too many"})");
        }) == "error: too many");
  CHECK(error_of([] { decode_lease_grant("{\"ID\":"); }) == "not JSON");
  CHECK(error_of([] { decode_lease_grant("[1]"); }) == "not a JSON object");
  CHECK(error_of([] { decode_lease_grant(R"({"header":[],"ID":"5","TTL":"10"})"); }) ==
        "header is not an object");
}

TEST_CASE("keepalive: a TTL above 0 is alive, none means etcd no longer has the lease") {
  auto reply = [](const std::string& result) {
    return R"({"result":{"header":{"revision":"3"})" + result + "}}";
  };
  CHECK(decode_keepalive(reply(R"(,"ID":"5","TTL":"10")"), 5).ttl == 10);
  KeepAlive gone = decode_keepalive(reply(R"(,"ID":"5")"), 5);
  CHECK((gone.ttl == 0 && !gone.error));
  CHECK(error_of([&] { decode_keepalive(reply(R"(,"ID":"6","TTL":"10")"), 5); }) ==
        "it is for lease 6, not ours (5)");
  CHECK(error_of([&] { decode_keepalive(reply(R"(,"TTL":"10")"), 5); }) ==
        "it is for lease 0, not ours (5)");
  CHECK(error_of([&] { decode_keepalive(reply(R"(,"ID":"5","TTL":"-1")"), 5); }) ==
        "TTL is negative (-1)");
  CHECK(error_of([] {
          decode_keepalive(R"({"header":{"revision":"3"},"ID":"5","TTL":"10"})", 5);
        }) == "result missing");
  KeepAlive failed = decode_keepalive(
      R"({"error":{"grpc_code":14,"http_code":503,"message":"etcdserver: no leader"}})", 5);
  REQUIRE(failed.error);
  CHECK(failed.error->code == 14);
  CHECK(failed.error->message == "etcdserver: no leader");
}

TEST_CASE(
    "queueing transaction: our key, our lease, a real create revision, in a queue in order, or no "
    "acquisition") {
  QueuedKey q = queued(txn(true, 9, {kv("jobs/a/1", 4), kv(kKey, 9)}));
  CHECK((q.created && q.create_revision == 9 && q.queue.revision == 9));
  REQUIRE(q.queue.kvs.size() == 2);
  CHECK((q.queue.kvs[0].key == "jobs/a/1" && q.queue.kvs[0].create_revision == 4));
  q = queued(txn(false, 12, {kv(kKey, 9), kv("jobs/a/2", 11)}));  // a retried put found our key
  CHECK(
      (!q.created && q.create_revision == 9 && q.queue.revision == 12 && q.queue.kvs.size() == 2));

  // succeeded: true is not enough.
  CHECK(error_of([] { queued(txn(true, 9, {kv(kKey, 0)})); }) == "create_revision missing or 0");
  CHECK(error_of([] { queued(txn(true, 9, {kv(kKey, -2)})); }) == "create_revision is negative");
  CHECK(error_of([] { queued(txn(true, 9, {kv("jobs/a/1", 9)})); }) ==
        "our key is not in the queue read");
  CHECK(error_of([] {
          queued(txn(true, 9, {kv("jobs/b/1", 3), kv(kKey, 9)}));
        }) == "it names key jobs/b/1, which was not asked for");
  CHECK(error_of([] {
          queued(txn(true, 9, {kv(kKey, 9), kv("jobs/a/1", 4)}));
        }) == "keys out of create-revision order");
  CHECK(error_of([] {
          queued(txn(true, 9, {kv(kKey, 5), kv(kKey, 9)}));
        }) == "our key is in the queue read twice");
  CHECK(error_of([] { queued(txn(true, 9, {kv(kKey, 9, 0)})); }) ==
        "our key is attached to lease 0, not ours (694d7c3e5a1b2c0d)");
  CHECK(error_of([] { queued(txn(true, 9, {kv(kKey, 8)})); }) ==
        "create_revision 8 is not the revision 9 of our put");
  CHECK(error_of([] { queued(txn(false, 9, {kv(kKey, 10)})); }) ==
        "create_revision 10 is past the store's revision 9");
  CHECK(error_of([] { queued(R"({"header":{"revision":"9"},"succeeded":true})"); }) ==
        "0 responses where 2 were asked for");
  CHECK(error_of([] { queued(R"({"succeeded":true,"responses":[]})"); }) ==
        "revision missing or 0");
  CHECK(error_of([] { queued(R"({"header":{"revision":"9"},"succeeded":"yes"})"); }) ==
        "succeeded is not true or false");
  json no_kvs = json::parse(txn(true, 9, {kv(kKey, 9)}));
  no_kvs["responses"][1]["response_range"].erase("kvs");
  CHECK(error_of([&] { queued(no_kvs.dump()); }) == "our key is not in the queue read");
  json not_base64 = json::parse(txn(true, 9, {kv(kKey, 9)}));
  not_base64["responses"][1]["response_range"]["kvs"][0]["key"] = "%%%";
  CHECK(error_of([&] { queued(not_base64.dump()); }) == "key is not base64");
}

TEST_CASE("range: every key within what was asked, each with a revision no later than the read") {
  json reply = {{"header", header(20)}, {"kvs", {kv("p/a", 3), kv("p/b", 5)}}};
  RangeReply r = decode_range(reply.dump(), "p/", "p0");
  CHECK(r.revision == 20);
  REQUIRE(r.kvs.size() == 2);
  CHECK((r.kvs[1].key == "p/b" && r.kvs[1].create_revision == 5 && r.kvs[1].lease == kLease));
  CHECK(decode_range(json({{"header", header(20)}}).dump(), "p/", "p0").kvs.empty());

  json outside = {{"header", header(20)}, {"kvs", {kv("p", 3)}}};
  CHECK(error_of([&] { decode_range(outside.dump(), "p/", "p0"); }) ==
        "it names key p, which was not asked for");
  CHECK(error_of([&] { decode_range(outside.dump(), "p/a"); }) ==
        "it names key p, which was not asked for");
  CHECK(decode_range(outside.dump(), "p").kvs.size() == 1);
  CHECK(decode_range(outside.dump(), "", std::string(1, '\0')).kvs.size() == 1);
  json late = {{"header", header(20)}, {"kvs", {kv("p/a", 21)}}};
  CHECK(error_of([&] { decode_range(late.dump(), "p/", "p0"); }) ==
        "create_revision 21 is past the store's revision 20");
  json unborn = {{"header", header(20)}, {"kvs", {kv("p/a", 0)}}};
  CHECK(error_of([&] { decode_range(unborn.dump(), "p/", "p0"); }) ==
        "create_revision missing or 0");
  json listless = {{"header", header(20)}, {"kvs", "p/a"}};
  CHECK(error_of([&] { decode_range(listless.dump(), "p/", "p0"); }) == "kvs is not a list");
}

TEST_CASE("watch messages: created, events, cancellation, errors") {
  WatchMessage m = decode_watch_message(R"({"result":{"header":{"revision":"2"},"created":true}})");
  CHECK((m.created && !m.canceled && m.events.empty() && m.revision == 2));

  json events = {{"result",
                  {{"header", header(8)},
                   {"events",
                    {{{"kv", kv("p/a", 3)}},
                     {{"type", "DELETE"}, {"kv", kv("p/b", 0)}, {"prev_kv", kv("p/b", 5)}}}}}}};
  m = decode_watch_message(events.dump());
  REQUIRE(m.events.size() == 2);
  CHECK((!m.events[0].deleted && m.events[0].kv.key == "p/a" && !m.events[0].prev_kv));
  CHECK((m.events[1].deleted && m.events[1].prev_kv && m.events[1].prev_kv->create_revision == 5));

  m = decode_watch_message(
      R"({"result":{"header":{"revision":"9"},"canceled":true,"compact_revision":"7"}})");
  CHECK((m.canceled && m.compact_revision == 7));
  m = decode_watch_message(
      R"({"result":{"header":{"revision":"9"},"canceled":true,"cancel_reason":"permission\ndenied"}})");
  CHECK((m.canceled && m.compact_revision == 0 && m.cancel_reason == "permission\\ndenied"));

  m = decode_watch_message(
      R"({"error":{"grpc_code":14,"http_code":503,"message":"etcdserver: no leader","http_status":"Service Unavailable"}})");
  REQUIRE(m.error);
  CHECK(m.error->code == 14);

  CHECK(error_of([] {
          decode_watch_message(
              R"({"result":{"header":{"revision":"2"},"events":[{"type":"EXPIRE","kv":{}}]}})");
        }) == "an event of type EXPIRE");
  CHECK(error_of([] {
          decode_watch_message(
              R"({"result":{"header":{"revision":"2"},"events":[{"type":"DELETE"}]}})");
        }) == "an event without its key");
  CHECK(error_of([] { decode_watch_message(R"({"result":{"events":[]}})"); }) ==
        "revision missing or 0");
  CHECK(error_of([] { decode_watch_message(R"({"other":1})"); }) == "result missing");
  CHECK(error_of([] { decode_watch_message("garbage"); }) == "not JSON");
}

TEST_CASE("auth token: present, and fit for a header line") {
  CHECK(decode_auth_token(R"({"header":{},"token":"abc.12"})") == "abc.12");
  CHECK(error_of([] { decode_auth_token(R"({"header":{}})"); }) == "token missing");
  CHECK(error_of([] { decode_auth_token(R"({"token":"a\r\nX-Evil: 1"})"); }) ==
        "the token has control characters");
}

TEST_CASE("line splitter: lines across chunks, each byte looked at once, lines capped") {
  LineSplitter s(16);
  CHECK(s.feed("ab").empty());
  CHECK(s.feed("c\nde") == std::vector<std::string>{"abc"});
  CHECK(s.feed("\n\nfg\nh") == std::vector<std::string>{"de", "", "fg"});
  CHECK(s.pending() == 1);
  CHECK(s.feed(std::string(15, 'x') + "\n") ==
        std::vector<std::string>{"h" + std::string(15, 'x')});
  CHECK(error_of([&] { s.feed(std::string(17, 'y')); }) ==
        "a line of the stream is longer than 16 bytes");

  LineSplitter t(16);
  CHECK(t.feed(std::string(10, 'a')).empty());
  CHECK(error_of([&] { t.feed(std::string(7, 'a') + "\n"); }) ==
        "a line of the stream is longer than 16 bytes");

  // An endless line, one byte at a time: stopped at the cap, in time linear in its length (a
  // splitter that rescanned from the start would take minutes here).
  LineSplitter endless;
  std::string error;
  std::size_t fed = 0;
  for (; fed <= kMaxStreamLine && error.empty(); ++fed)
    error = error_of([&] { endless.feed("z"); });
  CHECK(error == "a line of the stream is longer than 2 MiB");
  CHECK(fed == kMaxStreamLine + 1);
  CHECK(endless.pending() == kMaxStreamLine);
}
