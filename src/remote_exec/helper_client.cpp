// The Client kache uses: each call is one run of kache-reapi (wire.hpp), so that kache itself links
// neither gRPC nor protobuf and a hit pays nothing for remote execution.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fmt/format.h>
#include <system_error>

#include "remote_exec/client.hpp"
#include "remote_exec/wire.hpp"
#include "util/fs.hpp"
#include "util/process.hpp"
#include "util/process_bounded.hpp"

namespace kache::remote_exec {

namespace {

// Beyond the action's own timeout, what kache-reapi's other calls may take at most (the uploads, the
// ActionCache lookup and the reads of outputs: 60 s each in grpc_client.cpp); past it the run is killed.
constexpr double kHelperMarginSeconds = 300;

// The request in a new file of the temporary directory that only this user can read (it holds the
// project's files), created 0600 (O_CREAT|O_EXCL with the mode: never readable by others in between);
// its path. Throws std::system_error.
std::string write_private_request(const std::string& request) {
  std::string path;
  const int fd =
      util::create_temp_file(std::filesystem::temp_directory_path().string(), "kache-reapi-request", &path, 0600);
  try {
    util::write_fully(fd, request, path);
  } catch (...) {
    ::close(fd);
    ::unlink(path.c_str());
    throw;
  }
  ::close(fd);
  return path;
}

class HelperClient final : public Client {
 public:
  explicit HelperClient(const ServerSettings& s) : settings_(s) {}

  std::variant<Failure, Capabilities> capabilities() override {
    auto reply = call("capabilities", encode_request(settings_, ActionSpec{}));
    if (auto* f = std::get_if<Failure>(&reply)) return *f;
    auto c = decode_capabilities_reply(std::get<std::string>(reply));
    if (!c) return Failure{"error", "kache-reapi's reply could not be read"};
    return *c;
  }

  std::variant<Failure, ActionOutcome> execute(const ActionSpec& action) override {
    auto reply = call("execute", encode_request(settings_, action));
    if (auto* f = std::get_if<Failure>(&reply)) return *f;
    auto o = decode_outcome_reply(std::get<std::string>(reply));
    if (!o) return Failure{"error", "kache-reapi's reply could not be read"};
    return *o;
  }

 private:
  // kache-reapi's reply (its stdout), or why there is none. The request goes through a private file:
  // an action's inputs can exceed what a command line holds.
  std::variant<Failure, std::string> call(const char* op, const std::string& request) {
    const std::string helper = helper_path();
    if (::access(helper.c_str(), X_OK) != 0) return Failure{"error", helper + " cannot be run"};
    std::string path;
    try {
      path = write_private_request(request);
    } catch (const std::exception& e) {
      return Failure{"inputs", fmt::format("the request could not be written: {}", e.what())};
    }
    util::BoundedProcessResult r;
    try {
      const int limit_ms = static_cast<int>((settings_.timeout_s + kHelperMarginSeconds) * 1000);
      r = util::run_capture_bounded(helper, {helper, op, path}, util::current_environment(), limit_ms);
    } catch (const std::exception& e) {
      ::unlink(path.c_str());
      return Failure{"error", fmt::format("{} could not be started: {}", helper, e.what())};
    }
    ::unlink(path.c_str());
    if (r.timed_out) return Failure{"timeout", fmt::format("kache-reapi {} did not finish", op)};
    if (!r.ok()) {
      return Failure{"error", fmt::format("kache-reapi {} ended with {} {}: {}", op, r.term_signal ? "signal" : "status",
                                          r.term_signal ? r.term_signal : r.exit_code, r.err.substr(0, 300))};
    }
    return std::move(r.out);
  }

  ServerSettings settings_;
};

}  // namespace

std::unique_ptr<Client> open_client(const ServerSettings& settings) { return std::make_unique<HelperClient>(settings); }

}  // namespace kache::remote_exec
