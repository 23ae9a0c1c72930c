/* keyer: the command-line tool. Built only on the public API in include/keyer/. */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "keyer/keyer.h"

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *help;
} command;

static const command commands[] = {
    {"run", keyer_cmd_run, "the main job (default): keyer INPUT... -o OUTPUT [--blur|--replace|--detect|...]"},
    {"batch", keyer_cmd_batch, "one task's share of a manifest of inputs, resumable (Slurm arrays)"},
    {"devices", keyer_cmd_devices, "list CUDA GPUs, their memory, NVDEC/NVENC capability"},
    {"make-sample", keyer_cmd_make_sample, "write a test video (pan over a photo, with a tone)"},
    {"probe", keyer_cmd_probe, "count a video's frames, print its properties, dump a frame"},
    {"compare", keyer_cmd_compare, "compare two videos frame by frame (PSNR)"},
    {"key", keyer_cmd_key, "key one photo: blur or replace the background, or write alpha/matte"},
    {"analyze", keyer_cmd_analyze, "detect faces/bodies in a video or photo and draw overlays"},
    {"infer", keyer_cmd_infer, "run one model on a photo or a raw tensor, write its outputs"},
    {"models", keyer_cmd_models, "list the shipped models, their files and outputs"},
    {"bench", keyer_cmd_bench, "benchmarks (keyer bench nn --model NAME ...)"},
};

static void usage(FILE *out)
{
    fprintf(out, "usage: keyer INPUT... -o OUTPUT [options]   (the main job; keyer run --help)\n"
                 "       keyer [--version] [--help] COMMAND [ARGS]\n\nCommands:\n");
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].help);
    fprintf(out, "  %-10s %s\n", "version", "print the version and build capabilities");
    fprintf(out, "\nRun 'keyer COMMAND --help' for a command's options.\n");
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
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        if (!strcmp(cmd, commands[i].name))
            return commands[i].run(argc - 1, argv + 1);
    /* anything else is the main job: keyer INPUT... -o OUTPUT [options] */
    return keyer_cmd_run(argc, argv);
}
