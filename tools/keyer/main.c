/* keyer: the command-line tool. Built only on the public API in include/keyer/. */
#include <stdio.h>
#include <string.h>

#include "keyer/keyer.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: keyer [--version] [--help] COMMAND [ARGS]\n"
            "\n"
            "Commands:\n"
            "  version    print the version and build capabilities\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(cmd, "--version") || !strcmp(cmd, "version")) {
        printf("keyer %s (CUDA backends: %s)\n", keyer_version(),
               keyer_built_with_cuda() ? "built" : "not built");
        return 0;
    }
    fprintf(stderr, "keyer: unknown command '%s' (see keyer --help)\n", cmd);
    return 2;
}
