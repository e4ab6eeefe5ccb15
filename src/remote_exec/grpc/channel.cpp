#include "remote_exec/grpc/channel.hpp"

#include <google/bytestream/bytestream.grpc.pb.h>

#include <chrono>
#include <fmt/format.h>
#include <random>

#include "remote_exec/input_root.hpp"
#include "util/fs.hpp"

namespace kache::remote_exec {

std::variant<std::string, std::shared_ptr<grpc::Channel>> channel_target(const ServerSettings& settings) {
  const bool tls = settings.url.starts_with("grpcs://");
  if (!tls && !settings.url.starts_with("grpc://")) return std::string("the server is not grpc:// or grpcs://");
  const std::string address = settings.url.substr(settings.url.find("://") + 3);
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (tls) {
    grpc::SslCredentialsOptions options;
    if (!settings.ca_file.empty()) {
      try {
        options.pem_root_certs = util::read_file(settings.ca_file);
      } catch (const std::exception&) {
        return "cannot read the CA file " + settings.ca_file;
      }
    }
    credentials = grpc::SslCredentials(options);
  }
  grpc::ChannelArguments args;
  // Outputs (a fatbinary, an object) can pass the default 4 MiB in a batch read.
  args.SetMaxReceiveMessageSize(64 << 20);
  return grpc::CreateCustomChannel(address, credentials, args);
}

std::unique_ptr<grpc::ClientContext> call_context(const ServerSettings& settings, double seconds) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() +
                    std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000)));
  if (!settings.bearer_token.empty()) ctx->AddMetadata("authorization", "Bearer " + settings.bearer_token);
  return ctx;
}

namespace {

std::string instance_prefix(const ServerSettings& settings) {
  return settings.instance.empty() ? "" : settings.instance + "/";
}

std::string random_uuid() {
  std::random_device rd;
  std::uniform_int_distribution<unsigned> byte(0, 255);
  std::string hex;
  for (int i = 0; i < 16; ++i) hex += fmt::format("{:02x}", byte(rd));
  return fmt::format("{}-{}-{}-{}-{}", hex.substr(0, 8), hex.substr(8, 4), hex.substr(12, 4), hex.substr(16, 4),
                     hex.substr(20));
}

}  // namespace

grpc::Status read_blob(grpc::Channel& channel, const ServerSettings& settings, const std::string& hash,
                       std::int64_t size, std::string& bytes, double seconds) {
  bytes.clear();
  if (size < 0 || size > kMaxBlobBytes) {
    return grpc::Status(grpc::StatusCode::OUT_OF_RANGE, "a blob's digest gives a size beyond kache's bound");
  }
  if (size == 0) return grpc::Status::OK;
  auto ctx = call_context(settings, seconds);
  google::bytestream::ReadRequest req;
  req.set_resource_name(fmt::format("{}blobs/{}/{}", instance_prefix(settings), hash, size));
  auto stub = google::bytestream::ByteStream::NewStub(std::shared_ptr<grpc::Channel>(&channel, [](auto*) {}));
  auto reader = stub->Read(ctx.get(), req);
  google::bytestream::ReadResponse chunk;
  // Never more than the digest says: a server that sends more is cut off, not buffered.
  while (reader->Read(&chunk)) {
    if (static_cast<std::int64_t>(bytes.size() + chunk.data().size()) > size) {
      ctx->TryCancel();
      while (reader->Read(&chunk)) {
      }
      (void)reader->Finish();
      return grpc::Status(grpc::StatusCode::DATA_LOSS, "a blob read back is larger than its digest says");
    }
    bytes += chunk.data();
  }
  grpc::Status s = reader->Finish();
  if (s.ok() && (static_cast<std::int64_t>(bytes.size()) != size || content_digest(bytes) != hash)) {
    return grpc::Status(grpc::StatusCode::DATA_LOSS, "a blob read back does not match its digest");
  }
  return s;
}

grpc::Status write_blob(grpc::Channel& channel, const ServerSettings& settings, const std::string& hash,
                        const std::string& bytes, double seconds) {
  const std::string name =
      fmt::format("{}uploads/{}/blobs/{}/{}", instance_prefix(settings), random_uuid(), hash, bytes.size());
  auto ctx = call_context(settings, seconds);
  google::bytestream::WriteResponse resp;
  auto stub = google::bytestream::ByteStream::NewStub(std::shared_ptr<grpc::Channel>(&channel, [](auto*) {}));
  auto writer = stub->Write(ctx.get(), &resp);
  constexpr std::size_t kChunk = 1 << 20;
  std::size_t off = 0;
  do {
    google::bytestream::WriteRequest req;
    if (off == 0) req.set_resource_name(name);
    req.set_write_offset(static_cast<std::int64_t>(off));
    req.set_data(bytes.substr(off, kChunk));
    req.set_finish_write(off + kChunk >= bytes.size());
    if (!writer->Write(req)) break;
    off += kChunk;
  } while (off < bytes.size());
  writer->WritesDone();
  return writer->Finish();
}

}  // namespace kache::remote_exec
