// `pipesched`: the command-line face of the library. A thin layer over the headers: each
// subcommand parses its options into a library request (tools/request.hpp, tools/whatif.hpp,
// tools/analyze.hpp) and prints the result with the io/ writers. Its subcommands, options, exit
// codes and JSON shapes are a contract other tools script against.
//
// Exit codes: 0 success (and, for validate, a valid schedule); 1 the schedule is invalid or
// over its memory budget (one violation per line on stdout, or on stderr when stdout carries
// a picture or JSON), the same code in every format; 2 unusable input (bad options, malformed
// files, unknown names, numbers that overflow), with a one-line `error: ...` on stderr.
//
// The subcommands live in cmd_*.cpp and register themselves (cli_support.hpp says how to add
// one); this file parses the command line and runs the one it names.

#include <algorithm>
#include <cstdio>
#include <exception>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include <pipesched/version.hpp>

#include "cli_support.hpp"

int main(int argc, char** argv) {
  pipesched::cli::remember_arguments(argc, argv);
  CLI::App app{"pipesched: generate, check, simulate and draw pipeline-parallel schedules"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::to_string(PIPESCHED_VERSION_MAJOR) + "." +
                                        std::to_string(PIPESCHED_VERSION_MINOR) + "." +
                                        std::to_string(PIPESCHED_VERSION_PATCH));

  std::vector<pipesched::cli::subcommand> commands = pipesched::cli::subcommands();
  std::stable_sort(commands.begin(), commands.end(),
                   [](const auto& a, const auto& b) { return a.order < b.order; });
  std::vector<std::function<int()>> actions;
  for (const auto& c : commands) {
    actions.push_back(c.add(app));
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }

  try {
    for (std::size_t i = 0; i < commands.size(); ++i) {
      if (app.got_subcommand(commands[i].name)) {
        return actions[i]();
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
  return 2;
}
