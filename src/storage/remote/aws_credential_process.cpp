// A profile's credential_process: a program the user names (a vault's helper, aws-vault, a company's
// login tool) that prints credentials as JSON. Its command line is split by the shell's word rules but
// never run by a shell; it gets a time limit and its output a size limit.
#include "storage/remote/aws_credential_sources.hpp"
#include "util/process.hpp"
#include "util/process_bounded.hpp"
#include "util/shell_words.hpp"

namespace kache::storage::remote {

namespace {

// A login helper may wait on a hardware key or a browser; a minute is what a person tolerates.
constexpr int kProcessTimeoutMs = 60'000;
constexpr std::size_t kOutputLimit = 64 << 10;

}  // namespace

std::optional<AwsCredentials> credentials_from_process(const std::string& command, const std::string& profile,
                                                       std::string& why) {
  const std::string source = "credential_process of profile " + profile;
  const std::vector<std::string> argv = util::split_shell_words(command).texts();
  if (argv.empty()) {
    why = "no AWS credentials: the " + source + " is empty";
    return std::nullopt;
  }
  const util::Environment env = util::current_environment();
  std::optional<std::string> exe = argv[0];
  if (argv[0].find('/') == std::string::npos)
    exe = util::find_executable(argv[0], util::env_get(env, "PATH").value_or(""));
  if (!exe) {
    why = "no AWS credentials: the " + source + " names " + argv[0] + ", which is not found in PATH";
    return std::nullopt;
  }
  util::BoundedProcessResult result;
  try {
    // Its output is bounded while read (a helper that writes forever is killed at 64 KiB), and its stdin
    // is /dev/null: the compile's stdin (a pipe to the compiler, `-x c -`) is not the helper's to read.
    const util::BoundedRunOptions bounds{
        .timeout_ms = kProcessTimeoutMs, .max_output = kOutputLimit, .null_stdin = true};
    result = util::run_capture_bounded(*exe, argv, env, bounds);
  } catch (const std::exception& e) {
    why = "no AWS credentials: the " + source + " cannot be started: " + e.what();
    return std::nullopt;
  }
  if (result.output_exceeded || result.out.size() > kOutputLimit) {
    why = "no AWS credentials: the " + source + " printed more than 64 KiB";
    return std::nullopt;
  }
  if (result.timed_out) {
    why = "no AWS credentials: the " + source + " did not finish within 60 s";
    return std::nullopt;
  }
  if (!result.ok()) {
    why = "no AWS credentials: the " + source + " failed (exit status " + std::to_string(result.exit_code) + ")";
    return std::nullopt;
  }
  std::string parse_why;
  auto found = parse_credential_process_output(result.out, parse_why);
  if (!found) {
    why = "no AWS credentials: " + parse_why + " (" + source + ")";
    return std::nullopt;
  }
  found->source = source;
  return found;
}

}  // namespace kache::storage::remote
