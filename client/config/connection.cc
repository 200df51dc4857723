#include "client/config/connection.h"

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/net/coordinator_addresses.h"
#include "common/security/tls.h"
#include "common/yaml/bounded_yaml.h"

namespace baton::cli {
namespace {

absl::StatusOr<std::string> ReadFile(const std::string& path, const std::string& what) {
  std::ifstream in(path);
  if (!in) return absl::FailedPreconditionError(absl::StrCat("cannot read ", what, " ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string ExpandHome(const std::string& path, const std::string& home) {
  if (path == "~" || absl::StartsWith(path, "~/")) return home + path.substr(1);
  return path;
}

absl::StatusOr<ContextConfig> ParseContext(const YAML::Node& node, const std::string& where) {
  if (!node.IsMap()) return absl::InvalidArgumentError(absl::StrCat(where, ": must be a map"));
  ContextConfig context;
  for (const auto& kv : node) {
    const std::string key = kv.first.as<std::string>();
    if (!kv.second.IsScalar()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ".", key, ": must be a value"));
    }
    const std::string value = kv.second.as<std::string>();
    if (key == "coordinator") {
      context.coordinator = value;
    } else if (key == "ca") {
      context.ca = value;
    } else if (key == "token_file") {
      context.token_file = value;
    } else if (key == "insecure") {
      if (value != "true" && value != "false") {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ".insecure: must be true or false, got '", value, "'"));
      }
      context.insecure = value == "true";
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": unknown field '", key, "' (allowed: coordinator, ca, token_file, insecure)"));
    }
  }
  return context;
}

}  // namespace

absl::StatusOr<CliConfig> ParseCliConfig(const std::string& yaml, const std::string& origin) {
  YAML::Node root;
  try {
    root = LoadBounded(yaml);  // Not YAML::Load: some inputs never end (bounded_yaml.h).
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": not YAML: ", e.what()));
  }
  CliConfig config;
  if (root.IsNull()) return config;
  if (!root.IsMap()) return absl::InvalidArgumentError(absl::StrCat(origin, ": must be a map"));
  try {
    for (const auto& kv : root) {
      const std::string key = kv.first.as<std::string>();
      if (key == "current_context") {
        config.current_context = kv.second.as<std::string>();
      } else if (key == "contexts") {
        if (!kv.second.IsMap()) {
          return absl::InvalidArgumentError(absl::StrCat(origin, ": contexts must be a map"));
        }
        for (const auto& c : kv.second) {
          const std::string name = c.first.as<std::string>();
          absl::StatusOr<ContextConfig> context =
              ParseContext(c.second, absl::StrCat(origin, ": contexts.", name));
          if (!context.ok()) return context.status();
          config.contexts[name] = *std::move(context);
        }
      } else {
        return absl::InvalidArgumentError(absl::StrCat(
            origin, ": unknown field '", key, "' (allowed: current_context, contexts)"));
      }
    }
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": ", e.what()));
  }
  return config;
}

namespace {

// The config file, or an empty config when none exists at the default place.
absl::StatusOr<CliConfig> LoadConfig(const ConnectionInputs& in) {
  std::string path = in.config_env;
  const bool explicit_path = !path.empty();
  if (path.empty() && !in.xdg_config_home.empty()) {
    path = in.xdg_config_home + "/baton/config.yaml";
  }
  if (path.empty() && !in.home.empty()) path = in.home + "/.config/baton/config.yaml";
  if (path.empty()) return CliConfig{};
  std::ifstream probe(path);
  if (!probe && !explicit_path) return CliConfig{};
  absl::StatusOr<std::string> text = ReadFile(path, explicit_path ? "BATON_CONFIG" : "config");
  if (!text.ok()) return text.status();
  return ParseCliConfig(*text, path);
}

}  // namespace

absl::StatusOr<Connection> ResolveConnection(const ConnectionInputs& in,
                                             const std::string& default_coordinator) {
  absl::StatusOr<CliConfig> config = LoadConfig(in);
  if (!config.ok()) return config.status();
  Connection conn;
  conn.context = !in.context_flag.empty()  ? in.context_flag
                 : !in.context_env.empty() ? in.context_env
                                           : config->current_context;
  ContextConfig context;
  if (!conn.context.empty()) {
    auto it = config->contexts.find(conn.context);
    if (it == config->contexts.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "no context '", conn.context, "' in the config file (--context, BATON_CONTEXT or "
          "current_context; tools/certs.sh writes contexts)"));
    }
    context = it->second;
  }
  conn.coordinator = !in.coordinator_flag.empty()  ? in.coordinator_flag
                     : !in.coordinator_env.empty() ? in.coordinator_env
                     : !context.coordinator.empty() ? context.coordinator
                                                    : default_coordinator;
  absl::StatusOr<std::vector<std::string>> addresses = ParseCoordinatorAddresses(conn.coordinator);
  if (!addresses.ok()) {
    const std::string origin = !in.coordinator_flag.empty()  ? "--coordinator"
                               : !in.coordinator_env.empty() ? "BATON_COORDINATOR"
                               : !context.coordinator.empty()
                                   ? absl::StrCat("context '", conn.context, "' coordinator")
                                   : "the default coordinator";
    return absl::InvalidArgumentError(absl::StrCat(origin, ": ", addresses.status().message()));
  }
  conn.coordinators = *std::move(addresses);
  conn.insecure = in.insecure_flag || in.insecure_env == "1" || in.insecure_env == "true" ||
                  context.insecure;
  const std::string token_file = ExpandHome(
      !in.token_file_flag.empty() ? in.token_file_flag : context.token_file, in.home);
  if (!in.token_env.empty()) {
    conn.token = in.token_env;
  } else if (!token_file.empty()) {
    absl::StatusOr<std::string> token = ReadFile(token_file, "the token file");
    if (!token.ok()) return token.status();
    conn.token = std::string(absl::StripAsciiWhitespace(*token));
  }
  if (conn.insecure) {
    for (const std::string& address : conn.coordinators) {
      if (absl::Status s = CheckLoopbackOnly(address, "the coordinator address"); !s.ok()) {
        return absl::InvalidArgumentError(s.message());
      }
    }
    return conn;
  }
  conn.ca = ExpandHome(!in.ca_flag.empty() ? in.ca_flag : context.ca, in.home);
  if (conn.ca.empty()) {
    return absl::FailedPreconditionError(
        "no CA certificate to check the coordinator with: choose a context (--context, "
        "BATON_CONTEXT; tools/certs.sh writes config.yaml), pass --ca, or --insecure for "
        "a plaintext coordinator on a loopback address");
  }
  return conn;
}

namespace {

// Adds the bearer token to every call's initial metadata (plaintext channels included, where
// gRPC's call credentials are never sent).
class BearerToken final : public grpc::experimental::Interceptor {
 public:
  explicit BearerToken(const std::string* header) : header_(header) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->emplace("authorization", *header_);
    }
    methods->Proceed();
  }

 private:
  const std::string* const header_;
};

class BearerTokenFactory final : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit BearerTokenFactory(const std::string& token) : header_("Bearer " + token) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo*) override {
    return new BearerToken(&header_);
  }

 private:
  const std::string header_;  // Lives as long as the channel, which owns the factory.
};

}  // namespace

absl::StatusOr<CoordinatorChannel> OpenChannel(const Connection& conn,
                                               const grpc::ChannelArguments& args,
                                               absl::Duration probe_timeout) {
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (!conn.insecure) {
    TransportSecurity security;
    security.tls.ca = conn.ca;
    absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> tls =
        MakeChannelCredentials(security);
    if (!tls.ok()) return tls.status();
    credentials = *std::move(tls);
  }
  if (conn.coordinators.empty()) {
    return absl::InvalidArgumentError("no coordinator address (resolve the connection first)");
  }
  LeaderFinder::Options options;
  options.addresses = conn.coordinators;
  options.service = kJobServiceName;
  options.probe_timeout = probe_timeout;
  LeaderFinder finder(options, [&](const std::string& address) {
    std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> chain;
    if (!conn.token.empty()) chain.push_back(std::make_unique<BearerTokenFactory>(conn.token));
    return grpc::experimental::CreateCustomChannelWithInterceptors(address, credentials, args,
                                                                   std::move(chain));
  });
  absl::StatusOr<std::string> leader = finder.Find();
  if (!leader.ok()) return leader.status();
  return CoordinatorChannel{finder.ChannelTo(*leader), *leader};
}

}  // namespace baton::cli
