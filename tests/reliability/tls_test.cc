// TLS and mutual TLS, with throw-away certificates made by openssl (make_test_certs.sh): a TLS
// client is served; a plaintext client, a client that trusts another CA, and (under mutual TLS)
// a client without a certificate or with one from another CA are refused. The same through
// pkserve-cli, and pkserve's flag checks.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <random>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/client.h"
#include "tests/server/pkserve_process.h"
#include "tests/server/test_support.h"

namespace pkserve {
namespace {

using client::Client;
using client::ClientOptions;
using testing::CheckResponse;
using testing::MakeProblem;
using testing::RandomRequest;

// Runs a shell command; its exit status, and its output in *output.
int RunCommand(const std::string& command, std::string* output = nullptr) {
  std::string text;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return -1;
  char buffer[4096];
  while (size_t got = fread(buffer, 1, sizeof buffer, pipe)) text.append(buffer, got);
  const int status = pclose(pipe);
  if (output != nullptr) *output = text;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

class TlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    certs_ = new std::string(absl::StrCat(::testing::TempDir(), "pkserve_tls_", getpid()));
    std::string output;
    const int status = RunCommand(absl::StrCat("bash ", PK_MAKE_TEST_CERTS, " ", *certs_), &output);
    ASSERT_EQ(status, 0) << "make_test_certs.sh failed:\n" << output;
  }
  static void TearDownTestSuite() {
    RunCommand(absl::StrCat("rm -rf ", *certs_));
    delete certs_;
  }
  static std::string Cert(const char* name) { return absl::StrCat(*certs_, "/", name); }

  void StartServer(bool mutual) {
    ServerConfig config = testing::LoopbackConfig();
    config.backend = Backend::kCpu;
    config.tls.cert = Cert("server.pem");
    config.tls.key = Cert("server.key");
    if (mutual) config.tls.client_ca = Cert("ca.pem");
    server_ = testing::StartServer(config);
    ASSERT_NE(server_, nullptr);
  }

  // A client of the server with `tls`; host "127.0.0.1" or "localhost".
  std::unique_ptr<Client> Connect(const client::TlsOptions& tls,
                                  const std::string& host = "127.0.0.1") {
    ClientOptions options;
    options.target = absl::StrCat(host, ":", server_->port());
    options.deadline = absl::Seconds(10);
    options.tls = tls;
    absl::StatusOr<std::unique_ptr<Client>> made = Client::Connect(options);
    EXPECT_TRUE(made.ok()) << made.status();
    return made.ok() ? *std::move(made) : nullptr;
  }

  static client::TlsOptions Trusting(const char* ca) {
    client::TlsOptions tls;
    tls.enabled = true;
    tls.ca_file = Cert(ca);
    return tls;
  }
  static client::TlsOptions WithCertificate(const char* ca, const char* name) {
    client::TlsOptions tls = Trusting(ca);
    tls.cert_file = Cert(absl::StrCat(name, ".pem").c_str());
    tls.key_file = Cert(absl::StrCat(name, ".key").c_str());
    return tls;
  }

  // A TopK through `client`: "" if it was answered right, else what happened.
  std::string TryTopK(Client& client) {
    const v1::TopKRequest request =
        RandomRequest(MakeProblem({128, 128}, 8, pk::DType::kFloat32), 3, engine_, "tls");
    absl::StatusOr<v1::TopKResponse> response = client.TopK(request);
    if (!response.ok()) return response.status().ToString();
    return CheckResponse(request, *response);
  }

  static std::string* certs_;
  std::unique_ptr<Server> server_;
  std::mt19937_64 engine_{11};
};

std::string* TlsTest::certs_ = nullptr;

TEST_F(TlsTest, TlsClientsAreServedAndPlaintextOrUntrustingOnesAreNot) {
  StartServer(/*mutual=*/false);
  EXPECT_EQ(TryTopK(*Connect(Trusting("ca.pem"))), "");
  EXPECT_EQ(TryTopK(*Connect(Trusting("ca.pem"), "localhost")), "");
  absl::StatusOr<client::ServingStatus> health = Connect(Trusting("ca.pem"))->CheckHealth();
  ASSERT_TRUE(health.ok()) << health.status();
  EXPECT_EQ(*health, grpc::health::v1::HealthCheckResponse::SERVING);

  // Plaintext against a TLS port: refused.
  const std::string plaintext = TryTopK(*Connect(client::TlsOptions()));
  EXPECT_TRUE(absl::StartsWith(plaintext, "UNAVAILABLE")) << plaintext;
  // A client that trusts another CA refuses the server.
  const std::string untrusting = TryTopK(*Connect(Trusting("other_ca.pem")));
  EXPECT_TRUE(absl::StartsWith(untrusting, "UNAVAILABLE")) << untrusting;
  // A server name the certificate does not carry: refused; one it carries: served.
  client::TlsOptions wrong_name = Trusting("ca.pem");
  wrong_name.server_name = "pkserve.example";
  const std::string misnamed = TryTopK(*Connect(wrong_name));
  EXPECT_FALSE(misnamed.empty()) << "a certificate for other names was accepted";
  client::TlsOptions right_name = Trusting("ca.pem");
  right_name.server_name = "localhost";
  EXPECT_EQ(TryTopK(*Connect(right_name)), "");
}

TEST_F(TlsTest, MutualTlsServesOnlyClientsWithACertificateFromItsCa) {
  StartServer(/*mutual=*/true);
  EXPECT_EQ(TryTopK(*Connect(WithCertificate("ca.pem", "client"))), "");

  const std::string no_certificate = TryTopK(*Connect(Trusting("ca.pem")));
  EXPECT_TRUE(absl::StartsWith(no_certificate, "UNAVAILABLE")) << no_certificate;
  const std::string other_ca = TryTopK(*Connect(WithCertificate("ca.pem", "other_client")));
  EXPECT_TRUE(absl::StartsWith(other_ca, "UNAVAILABLE")) << other_ca;
  const std::string plaintext = TryTopK(*Connect(client::TlsOptions()));
  EXPECT_TRUE(absl::StartsWith(plaintext, "UNAVAILABLE")) << plaintext;
  // A refused handshake costs the server nothing: the good client is still served.
  EXPECT_EQ(TryTopK(*Connect(WithCertificate("ca.pem", "client"))), "");
}

TEST_F(TlsTest, ClientOptionsAreCheckedBeforeConnecting) {
  StartServer(/*mutual=*/false);
  ClientOptions options;
  options.target = absl::StrCat("127.0.0.1:", server_->port());
  options.tls.ca_file = Cert("ca.pem");  // files given with TLS off
  EXPECT_EQ(Client::Connect(options).status().code(), absl::StatusCode::kInvalidArgument);
  options.tls = Trusting("ca.pem");
  options.tls.cert_file = Cert("client.pem");  // a certificate without its key
  EXPECT_EQ(Client::Connect(options).status().code(), absl::StatusCode::kInvalidArgument);
  options.tls = Trusting("no_such_ca.pem");
  absl::Status missing = Client::Connect(options).status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(missing.message(), "no_such_ca.pem")) << missing;
}

TEST_F(TlsTest, PkserveCliSpeaksTlsWithItsFlags) {
  StartServer(/*mutual=*/true);
  const std::string target = absl::StrCat("--target=127.0.0.1:", server_->port());
  const std::string trust = absl::StrCat(" --tls_ca=", Cert("ca.pem"));
  const std::string identity =
      absl::StrCat(" --tls_cert=", Cert("client.pem"), " --tls_key=", Cert("client.key"));
  std::string output;
  EXPECT_EQ(RunCommand(absl::StrCat(PKSERVE_CLI, " topk --widths=64,64 --k=4 --random_rows=2 ",
                                    target, trust, identity),
                       &output),
            0)
      << output;
  EXPECT_TRUE(absl::StrContains(output, "topk: 2 rows")) << output;
  EXPECT_EQ(RunCommand(absl::StrCat(PKSERVE_CLI, " health ", target, trust, identity), &output), 0)
      << output;
  EXPECT_EQ(
      RunCommand(absl::StrCat(PKSERVE_CLI, " health --deadline_ms=5000 ", target, trust), &output),
      1)
      << "no client certificate, yet: " << output;
  EXPECT_EQ(RunCommand(absl::StrCat(PKSERVE_CLI, " health --deadline_ms=5000 ", target), &output),
            1)
      << "plaintext, yet: " << output;
  EXPECT_EQ(
      RunCommand(absl::StrCat(PKSERVE_CLI, " health ", target, " --tls_cert=", Cert("client.pem")),
                 &output),
      2)
      << "a certificate without its key is bad usage: " << output;
}

TEST_F(TlsTest, PkserveRefusesIncompleteOrUnreadableTlsFlags) {
  std::string output;
  const std::string pkserve =
      absl::StrCat(PKSERVE_BINARY, " --address=127.0.0.1:0 --metrics_address= --backend=cpu");
  EXPECT_EQ(RunCommand(absl::StrCat(pkserve, " --tls_cert=", Cert("server.pem")), &output), 2)
      << output;
  EXPECT_TRUE(absl::StrContains(output, "--tls_key")) << output;
  EXPECT_EQ(RunCommand(absl::StrCat(pkserve, " --tls_client_ca=", Cert("ca.pem")), &output), 2)
      << output;
  EXPECT_EQ(RunCommand(absl::StrCat(pkserve, " --tls_cert=", Cert("server.pem"),
                                    " --tls_key=/nonexistent/server.key"),
                       &output),
            1)
      << output;
  EXPECT_TRUE(absl::StrContains(output, "--tls_key=/nonexistent/server.key")) << output;
  // A key that is not the certificate's: pkserve cannot listen, and says why.
  EXPECT_EQ(RunCommand(absl::StrCat(pkserve, " --tls_cert=", Cert("server.pem"),
                                    " --tls_key=", Cert("client.key")),
                       &output),
            1)
      << output;
  EXPECT_TRUE(absl::StrContains(output, "tls")) << output;
}

}  // namespace
}  // namespace pkserve
