#include "server/api_key.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

namespace tessera::server {
namespace {

const char* no_env(const char*) { return nullptr; }

TEST(ApiKeyTest, ConfigThenFileThenEnvironment) {
  DaemonConfig c;
  EXPECT_EQ(*resolve_api_key(c, no_env), "");
  EXPECT_EQ(*resolve_api_key(c, [](const char* name) {
    return std::string(name) == "TESSERA_API_KEY" ? "from-env" : nullptr;
  }), "from-env");
  const std::filesystem::path file =
      std::filesystem::temp_directory_path() / ("tessera_api_key_" + std::to_string(getpid()));
  std::ofstream(file) << "  from-file \nsecond line\n";
  c.api_key_file = file.string();
  EXPECT_EQ(*resolve_api_key(c, no_env), "from-file");
  c.api_key = "from-config";
  EXPECT_EQ(*resolve_api_key(c, no_env), "from-config");
  std::filesystem::remove(file);
}

TEST(ApiKeyTest, AnUnreadableOrEmptyFileIsAnErrorNamingIt) {
  DaemonConfig c;
  c.api_key_file = "/nonexistent/key";
  absl::StatusOr<std::string> key = resolve_api_key(c, no_env);
  ASSERT_FALSE(key.ok());
  EXPECT_NE(key.status().message().find("/nonexistent/key"), absl::string_view::npos);
  const std::filesystem::path file =
      std::filesystem::temp_directory_path() / ("tessera_empty_key_" + std::to_string(getpid()));
  std::ofstream(file) << "\n";
  c.api_key_file = file.string();
  EXPECT_FALSE(resolve_api_key(c, no_env).ok());
  std::filesystem::remove(file);
}

}  // namespace
}  // namespace tessera::server
