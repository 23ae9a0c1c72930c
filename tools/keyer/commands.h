/* The keyer tool's subcommands; each returns the process exit status. */
#ifndef KEYER_TOOLS_COMMANDS_H
#define KEYER_TOOLS_COMMANDS_H

int keyer_cmd_models(int argc, char **argv);
int keyer_cmd_infer(int argc, char **argv);
int keyer_cmd_bench(int argc, char **argv);
int keyer_cmd_key(int argc, char **argv);
int keyer_cmd_analyze(int argc, char **argv);
/* The main job (the default command) and its companions: cmd_run.c, cmd_devices.c, cmd_tools.c. */
int keyer_cmd_run(int argc, char **argv);
int keyer_cmd_devices(int argc, char **argv);
int keyer_cmd_make_sample(int argc, char **argv);
int keyer_cmd_probe(int argc, char **argv);
int keyer_cmd_compare(int argc, char **argv);
/* The main job over a manifest, one shard per task: cmd_batch.c. */
int keyer_cmd_batch(int argc, char **argv);

#endif
