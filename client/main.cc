// `baton`: the command-line client. Everything lives in client/cli.h; main only hands over
// the arguments and the process environment.

#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "client/cli.h"

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  auto getenv_or_empty = [](const char* name) -> std::string {
    const char* value = std::getenv(name);
    return value != nullptr ? value : "";
  };
  baton::cli::CliEnvironment env;
  env.coordinator_env = getenv_or_empty("BATON_COORDINATOR");
  env.stdout_is_tty = isatty(STDOUT_FILENO) != 0;
  env.no_color = getenv_or_empty("NO_COLOR");
  env.context_env = getenv_or_empty("BATON_CONTEXT");
  env.config_env = getenv_or_empty("BATON_CONFIG");
  env.token_env = getenv_or_empty("BATON_TOKEN");
  env.insecure_env = getenv_or_empty("BATON_INSECURE");
  env.xdg_config_home = getenv_or_empty("XDG_CONFIG_HOME");
  env.home = getenv_or_empty("HOME");
  return baton::cli::RunCli(args, std::cout, std::cerr, env);
}
