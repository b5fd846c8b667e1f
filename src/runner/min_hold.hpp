#pragma once
// -min-hold: a hold whose child ended sooner is kept until its time is up, so that a short job
// that cron starts on hosts whose clocks or cron daemons differ by a few seconds runs once, not
// once per host.
#include <optional>
#include <string>

#include "backend/backend.hpp"
#include "runner/signals.hpp"
#include "runner/systemd_notify.hpp"

namespace lk {

// Keeps `hold` until `until`, a stopping signal or its loss, whichever comes first, and returns
// why it was lost, if it was. The stored record (where it is lock's) and systemd's STATUS say
// until when.
std::optional<std::string> keep_until(Clock::time_point until, Hold& hold, Signals& signals,
                                      SystemdNotify& systemd);

}  // namespace lk
