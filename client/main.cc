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
  const char* coordinator = std::getenv("BATON_COORDINATOR");
  const baton::cli::CliEnvironment env{coordinator != nullptr ? coordinator : "",
                                       isatty(STDOUT_FILENO) != 0};
  return baton::cli::RunCli(args, std::cout, std::cerr, env);
}
