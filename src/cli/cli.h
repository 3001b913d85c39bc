/*
 * cli.h — subcommands of the `kvik` command. Each takes argv starting at its
 * own name and returns the process exit status (0 ok, 1 runtime error,
 * 2 usage error). Errors are one line on stderr.
 */
#ifndef KVIK_CLI_H
#define KVIK_CLI_H

#include "kvik.h"

int cmd_info(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_run(int argc, char **argv);

#endif /* KVIK_CLI_H */
