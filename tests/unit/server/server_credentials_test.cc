// The TLS files are checked before gRPC sees them: each error names the key and the file that is
// wrong (server_credentials.h, pem_check.h).
#include "server/server_credentials.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

namespace tessera::server {
namespace {

class ServerCredentialsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // One directory per process: ctest runs each test in a process of its own, side by side.
    dir_ = ::testing::TempDir() + "/tessera-pem-check-" + std::to_string(::getpid());
    std::filesystem::create_directories(dir_);
    const std::string script =
        "set -e; cd '" + dir_ + "'; "
        "openssl req -x509 -newkey rsa:2048 -nodes -keyout a.key -out a.pem -days 2 -subj /CN=a 2>/dev/null; "
        "openssl req -x509 -newkey rsa:2048 -nodes -keyout b.key -out b.pem -days 2 -subj /CN=b 2>/dev/null";
    have_openssl_ = std::system("openssl version > /dev/null 2>&1") == 0 && std::system(script.c_str()) == 0;
    // A certificate whose base64 is damaged half-way.
    std::ifstream in(dir_ + "/a.pem");
    std::string pem((std::istreambuf_iterator<char>(in)), {});
    const size_t mid = pem.size() / 2;
    pem.replace(mid, 8, "!!!!!!!!");
    std::ofstream(dir_ + "/broken.pem") << pem;
  }

  static void TearDownTestSuite() { std::filesystem::remove_all(dir_); }

  void SetUp() override {
    if (!have_openssl_) GTEST_SKIP() << "the openssl command is needed to make test certificates";
  }

  static absl::Status start_with(const std::string& cert, const std::string& key,
                                 const std::string& ca = "") {
    DaemonConfig config;
    config.tls_cert = cert.empty() ? "" : dir_ + "/" + cert;
    config.tls_key = key.empty() ? "" : dir_ + "/" + key;
    config.tls_client_ca = ca.empty() ? "" : dir_ + "/" + ca;
    return make_server_credentials(config).status();
  }

  static bool mentions(const absl::Status& s, const std::string& text) {
    return std::string(s.message()).find(text) != std::string::npos;
  }

  static inline std::string dir_;
  static inline bool have_openssl_ = false;
};

TEST_F(ServerCredentialsTest, AMatchingPairIsAccepted) {
  EXPECT_TRUE(start_with("a.pem", "a.key").ok());
  EXPECT_TRUE(start_with("a.pem", "a.key", "b.pem").ok());
}

TEST_F(ServerCredentialsTest, AKeyOfAnotherCertificateNamesBothFiles) {
  const absl::Status s = start_with("a.pem", "b.key");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(mentions(s, "tls_key")) << s;
  EXPECT_TRUE(mentions(s, dir_ + "/b.key")) << s;
  EXPECT_TRUE(mentions(s, dir_ + "/a.pem")) << s;
  EXPECT_TRUE(mentions(s, "is not the private key")) << s;
}

TEST_F(ServerCredentialsTest, ACertificateGivenAsTheKeyNamesTheKeyFile) {
  const absl::Status s = start_with("a.pem", "a.pem");
  EXPECT_TRUE(mentions(s, "tls_key: \"" + dir_ + "/a.pem\" holds no PEM private key")) << s;
}

TEST_F(ServerCredentialsTest, AKeyGivenAsTheCertificateNamesTheCertificateFile) {
  const absl::Status s = start_with("a.key", "a.key");
  EXPECT_TRUE(mentions(s, "tls_cert: \"" + dir_ + "/a.key\" holds no PEM certificate")) << s;
}

TEST_F(ServerCredentialsTest, ADamagedCertificateNamesItsFile) {
  const absl::Status s = start_with("broken.pem", "a.key");
  EXPECT_TRUE(mentions(s, "tls_cert: \"" + dir_ + "/broken.pem\"")) << s;
}

TEST_F(ServerCredentialsTest, AClientCaThatIsNotACertificateNamesItsFile) {
  const absl::Status s = start_with("a.pem", "a.key", "b.key");
  EXPECT_TRUE(mentions(s, "tls_client_ca: \"" + dir_ + "/b.key\" holds no PEM certificate")) << s;
}

TEST_F(ServerCredentialsTest, AnUnreadableFileIsNamed) {
  const absl::Status s = start_with("a.pem", "missing.key");
  EXPECT_TRUE(mentions(s, "tls_key: cannot read \"" + dir_ + "/missing.key\"")) << s;
}

}  // namespace
}  // namespace tessera::server
