#pragma once
// The holder record in a ticket or slot file: who waits there, or who holds the slot.
#include <string>

#include "backend/holder_record.hpp"

namespace lk {

// Overwrites the record in place, padded with blanks (which JSON ignores) to the file's size:
// truncating instead costs a journal transaction on ext4, on the path every holder takes. A file
// too large to be a record (grown by someone else while we did not hold it) is emptied first.
void write_record(int fd, const std::string& path, const HolderRecord& record);

// A record that does not parse belongs to a holder still writing it (HolderRecord::who() says
// so).
HolderRecord parse_record(const std::string& text);

}  // namespace lk
