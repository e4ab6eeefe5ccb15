#pragma once
// Wall-clock time and the file-time granularity rule of the spec: a file whose timestamp lies within
// one granule before a moment may have been modified after that moment.
#include <cstdint>
#include <string>

namespace kache::util {

std::int64_t now_ns();  // CLOCK_REALTIME, nanoseconds since the epoch

// The clock file times are stamped from, read now: on Linux the coarse realtime clock (the kernel's
// current_time() takes the tick-updated timekeeper), elsewhere CLOCK_REALTIME. A file modified at or
// after this moment gets a time >= this value, so comparing file times against it is exact on Linux:
// "modified in the current tick or later" is `file_time >= file_clock_now_ns() - margin` with margin 0.
std::int64_t file_clock_now_ns();

// How far a file time on the filesystem holding `path` can trail file_clock_now_ns(): 0 on Linux (the
// file clock is the coarse clock file times come from), 2 s on filesystems that keep whole/even seconds
// (FAT, exFAT, HFS+), 1 ms on macOS and Windows, 20 ms elsewhere.
std::int64_t file_time_margin_ns(const std::string& path);

}  // namespace kache::util
