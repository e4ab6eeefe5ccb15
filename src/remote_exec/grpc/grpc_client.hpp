#pragma once
// The REAPI client over gRPC (grpc_client.cpp), in kache-reapi only: kache's own Client (open_client)
// runs kache-reapi (wire.hpp).
#include <memory>

#include "remote_exec/client.hpp"

namespace kache::remote_exec {

// A client for the server; the connection opens on the first call.
std::unique_ptr<Client> open_grpc_client(const ServerSettings& settings);

}  // namespace kache::remote_exec
