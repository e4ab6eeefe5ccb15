// kache-reapi: remote execution's gRPC side (docs/remote-execution.md), the only program that links gRPC
// and protobuf. kache runs it for a miss that runs stages remotely (`execute`), for doctor's rows
// (`capabilities`) and as `kache worker` (`worker`); a hit never starts it, so it never pays protobuf's
// descriptor registration. Requests and replies: remote_exec/wire.hpp.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "remote_exec/grpc/grpc_client.hpp"
#include "remote_exec/wire.hpp"
#include "remote_exec/grpc/worker.hpp"
#include "util/fs.hpp"

namespace {

using namespace kache::remote_exec;

std::string bearer_token() {
  const char* token = std::getenv("KACHE_REMOTE_EXECUTION_BEARER_TOKEN");
  return token ? token : "";
}

int usage() {
  std::fputs("usage: kache-reapi execute|capabilities REQUEST_FILE, or kache-reapi worker SETTINGS_JSON\n"
             "(run by kache: docs/remote-execution.md)\n",
             stderr);
  return 2;
}

int serve_request(std::string_view op, const std::string& request_file) {
  std::optional<Request> request;
  try {
    request = decode_request(kache::util::read_file(request_file));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kache-reapi: %s\n", e.what());
    return 2;
  }
  if (!request) {
    std::fputs("kache-reapi: the request could not be read\n", stderr);
    return 2;
  }
  request->settings.bearer_token = bearer_token();
  auto client = open_grpc_client(request->settings);
  const std::string reply =
      op == "execute" ? encode_reply(client->execute(request->action)) : encode_reply(client->capabilities());
  return std::fwrite(reply.data(), 1, reply.size(), stdout) == reply.size() && std::fflush(stdout) == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) return usage();
  const std::string_view op = argv[1];
  if (op == "execute" || op == "capabilities") return serve_request(op, argv[2]);
  if (op != "worker") return usage();
  auto settings = decode_worker_settings(argv[2]);
  if (!settings) {
    std::fputs("kache-reapi: the worker's settings could not be read\n", stderr);
    return 2;
  }
  settings->server.bearer_token = bearer_token();
  return run_worker(*settings);
}
