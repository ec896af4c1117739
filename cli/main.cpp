#include "commands.hpp"

int main(int argc, char** argv) { return ymlopt::cli_main(std::vector<std::string>(argv + 1, argv + argc)); }
