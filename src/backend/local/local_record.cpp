#include "backend/local/local_record.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "backend/local/state_file.hpp"

namespace lk {

void write_record(int fd, const std::string& path, const HolderRecord& record) {
  std::string json = record.to_json();
  struct stat st;
  if (fstat(fd, &st) < 0) throw sys_error("cannot write " + path);
  if (st.st_size > static_cast<off_t>(kMaxStateFile)) {
    if (ftruncate(fd, 0) < 0) throw sys_error("cannot write " + path);
    st.st_size = 0;
  }
  if (static_cast<off_t>(json.size()) < st.st_size) json.resize(st.st_size, ' ');
  ssize_t n = pwrite(fd, json.data(), json.size(), 0);
  if (n != static_cast<ssize_t>(json.size()))  // a short write: the file system is full
    throw sys_error("cannot write " + path, n < 0 ? errno : ENOSPC);
}

HolderRecord parse_record(const std::string& text) {
  try {
    return HolderRecord::from_json(text);
  } catch (const Error&) {
    return HolderRecord();  // HolderRecord::who() says so
  }
}

}  // namespace lk
