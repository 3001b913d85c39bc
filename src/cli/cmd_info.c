/* cmd_info.c — `kvik info` (placeholder until the GGUF reader lands). */
#include <stdio.h>

#include "cli/cli.h"

int cmd_info(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "kvik info: not built yet\n");
    return 1;
}
