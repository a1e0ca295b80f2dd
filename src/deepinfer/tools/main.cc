// deepinfer: the command-line entry point. Each subcommand lives in its own file.
#include <cstdio>
#include <cstring>
#include <string>

int main(int argc, char** argv) {
  std::fprintf(stderr, "usage: deepinfer SUBCOMMAND [flags]\n");
  return 2;
}
