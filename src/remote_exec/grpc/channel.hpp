#pragma once
// The gRPC channel to an REAPI server, shared by the client and `kache worker`: grpc://host:port in the
// clear, grpcs://host:port over TLS (the system's CAs, or the configured CA file). Includes gRPC: only
// the .cpp files of this folder include it.
#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <variant>

#include "remote_exec/client.hpp"

namespace kache::remote_exec {

// The channel, or why none can be made (a malformed URL, an unreadable CA file).
std::variant<std::string, std::shared_ptr<grpc::Channel>> channel_target(const ServerSettings& settings);

// A call's context: its deadline `seconds` from now, the bearer token when there is one.
std::unique_ptr<grpc::ClientContext> call_context(const ServerSettings& settings, double seconds);

// A blob by ByteStream (any size): read whole (its digest checked), or written whole.
grpc::Status read_blob(grpc::Channel& channel, const ServerSettings& settings, const std::string& hash,
                       std::int64_t size, std::string& bytes, double seconds);
grpc::Status write_blob(grpc::Channel& channel, const ServerSettings& settings, const std::string& hash,
                        const std::string& bytes, double seconds);

}  // namespace kache::remote_exec
