#include "util/parallel.hpp"

#include <algorithm>
#include <system_error>
#include <thread>
#include <vector>

namespace kache::util {

std::size_t slice_count(std::size_t count, std::size_t max_threads, std::size_t min_per_slice) {
  const std::size_t cores = std::max(1u, std::thread::hardware_concurrency());
  return std::max<std::size_t>(1, std::min({max_threads, cores, count / std::max<std::size_t>(1, min_per_slice)}));
}

void for_each_slice(std::size_t count, std::size_t slices,
                    const std::function<void(std::size_t, std::size_t, std::size_t)>& fn) {
  slices = std::max<std::size_t>(1, slices);
  auto begin_of = [&](std::size_t s) { return count * s / slices; };
  std::vector<std::thread> helpers;
  std::size_t started = 1;
  try {
    for (; started < slices; ++started) helpers.emplace_back(fn, started, begin_of(started), begin_of(started + 1));
  } catch (const std::system_error&) {
    // No more threads: the slices that did not start run below.
  }
  fn(0, 0, begin_of(1));
  for (std::size_t s = started; s < slices; ++s) fn(s, begin_of(s), begin_of(s + 1));
  for (auto& h : helpers) h.join();
}

}  // namespace kache::util
