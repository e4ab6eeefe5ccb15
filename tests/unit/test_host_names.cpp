// Host names resolved by c-ares (storage/remote/host_names.hpp): from a hosts file (CARES_HOSTS points
// c-ares at the test's own), IPv4 first, and a DNS server that never answers costs the deadline, not
// the resolver's own retries (a UDP socket on loopback that reads nothing stands in for it).
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>

#include "storage/remote/host_names.hpp"
#include "storage/remote/remote_failure.hpp"
#include "storage/remote/schemes.hpp"
#include "util/fs.hpp"

namespace kache::storage::remote {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

class HostNames : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kache-host-names-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    ::unsetenv("CARES_HOSTS");
    fs::remove_all(dir_);
  }
  void hosts_file(const std::string& text) {
    const std::string path = (dir_ / "hosts").string();
    util::write_file(path, text);
    ::setenv("CARES_HOSTS", path.c_str(), 1);
  }
  static std::vector<std::string> numeric(const std::vector<HostAddress>& addresses) {
    std::vector<std::string> out;
    for (const auto& a : addresses) out.push_back(a.numeric_host());
    return out;
  }
  fs::path dir_;
};

core::RemoteUrl url_of(const std::string& spec) { return core::parse_remote_url(spec, {}, remote_schemes()); }

TEST_F(HostNames, ANameFromTheHostsFileIPv4First) {
  hosts_file("::1 dual.kache.test\n127.0.0.2 dual.kache.test\n");
  const auto addresses = resolve_host_within(url_of("http://dual.kache.test:8080"), Clock::now() + std::chrono::seconds(30));
  EXPECT_EQ(numeric(addresses), (std::vector<std::string>{"127.0.0.2", "::1"}));
  const auto* v4 = reinterpret_cast<const sockaddr_in*>(&addresses[0].storage);
  EXPECT_EQ(ntohs(v4->sin_port), 8080);
}

TEST_F(HostNames, LocalhostResolvesFromTheSystemHostsFile) {
  const auto addresses = resolve_host_within(url_of("redis://localhost"), Clock::now() + std::chrono::seconds(30));
  ASSERT_FALSE(addresses.empty());
  EXPECT_TRUE(addresses[0].numeric_host() == "127.0.0.1" || addresses[0].numeric_host() == "::1")
      << addresses[0].numeric_host();
}

TEST_F(HostNames, ANumericAddressIsNotResolved) {
  EXPECT_EQ(numeric(resolve_host_within(url_of("http://[::1]:9"), Clock::now())), (std::vector<std::string>{"::1"}));
  EXPECT_EQ(numeric(resolve_host_within(url_of("http://10.1.2.3"), Clock::now())),
            (std::vector<std::string>{"10.1.2.3"}));
}

TEST_F(HostNames, ADnsServerThatNeverAnswersCostsTheDeadline) {
  hosts_file("");
  const int silent = ::socket(AF_INET, SOCK_DGRAM, 0);
  ASSERT_GE(silent, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(silent, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  socklen_t length = sizeof(address);
  ::getsockname(silent, reinterpret_cast<sockaddr*>(&address), &length);
  const std::string server = "127.0.0.1:" + std::to_string(ntohs(address.sin_port));
  try {
    resolve_host_within(url_of("redis://hang.kache.test"), Clock::now() + std::chrono::milliseconds(200), server);
    ADD_FAILURE() << "resolved a name no server answers for";
  } catch (const RemoteError& e) {
    EXPECT_EQ(e.kind(), RemoteFailure::Kind::timeout) << e.what();
    EXPECT_NE(std::string(e.what()).find("connect-timeout"), std::string::npos) << e.what();
  }
  ::close(silent);
}

TEST_F(HostNames, AnUnknownNameIsAnError) {
  hosts_file("127.0.0.1 known.kache.test\n");
  // No DNS server at all (port 9 of loopback refuses): the name is not in the hosts file, and DNS fails.
  try {
    resolve_host_within(url_of("http://unknown.kache.test"), Clock::now() + std::chrono::seconds(30), "127.0.0.1:9");
    ADD_FAILURE() << "resolved an unknown name";
  } catch (const RemoteError& e) {
    EXPECT_EQ(e.kind(), RemoteFailure::Kind::error) << e.what();
    EXPECT_NE(std::string(e.what()).find("cannot resolve unknown.kache.test"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kache::storage::remote
