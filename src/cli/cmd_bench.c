/* cmd_bench.c — `kvik bench` (placeholder). */
#include <stdio.h>

#include "cli/cli.h"

int cmd_bench(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "kvik bench: not built yet\n");
    return 1;
}
