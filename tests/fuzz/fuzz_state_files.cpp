// The local backend's readers of its state files, which anyone who can write to a shared state
// directory can fill: read_state_file and parse_meta.
//
// Input: the first byte says how many times the rest is repeated in the file (0 to 255, to
// reach past the 64 KiB a state file may have); the rest, the file's bytes.
// read_state_file must give the file back exactly when it is at most kMaxStateFile bytes, and
// nullopt when it is larger. parse_meta of the file's text must return nullopt or a Meta with a
// limit of 0 or more that format_meta writes back as text parse_meta reads as the same Meta.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include "backend/local/prefix_dir.hpp"
#include "backend/local/state_file.hpp"
#include "fuzz_check.hpp"

namespace {

using lk::kMaxStateFile;

// A file of memory: the reader's pread sees what a file in a state directory would hold.
lk::UniqueFd file_of(const std::string& text) {
  lk::UniqueFd fd(memfd_create("fuzz-state-file", MFD_CLOEXEC));
  FUZZ_CHECK(fd);
  for (std::size_t at = 0; at < text.size();) {
    ssize_t n = write(fd.get(), text.data() + at, text.size() - at);
    FUZZ_CHECK(n > 0);
    at += static_cast<std::size_t>(n);
  }
  return fd;
}

void check_meta(const std::string& text) {
  auto meta = lk::parse_meta(text);
  if (!meta) return;
  FUZZ_CHECK_MSG(meta->limit >= 0, fuzz::shown(text));
  std::string written = lk::format_meta(*meta);
  auto again = lk::parse_meta(written);
  FUZZ_CHECK_MSG(again && again->limit == meta->limit && again->next_ticket == meta->next_ticket,
                 fuzz::shown(text) + " -> " + fuzz::shown(written));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::string piece(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::string text;
  for (int i = 0; i <= data[0]; ++i) text += piece;
  lk::UniqueFd fd = file_of(text);
  auto read = lk::read_state_file(fd.get());
  if (text.size() > kMaxStateFile)
    FUZZ_CHECK_MSG(!read, std::to_string(text.size()) + " bytes read as a state file");
  else
    FUZZ_CHECK_MSG(read && *read == text, std::to_string(text.size()) + " bytes read wrong");
  check_meta(piece);
  return 0;
}
