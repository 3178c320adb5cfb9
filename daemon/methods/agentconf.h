/*
 * What a known agent CLI needs in its session home to work through
 * spd's broker with no setup of the user's (spctl agent): the settings
 * files that point it at the broker, make it read the turn key from the
 * environment, and turn off its telemetry, update checks and own sandbox
 * (spd is the sandbox), and the environment variables that do the same.
 * The agent is recognised by its program's name; an unknown one gets
 * nothing here (the broker's variables only, which every agent run has).
 *
 *   claude, claude-code-acp   environment only
 *   codex, codex-acp          ~/.codex/config.toml
 *   gemini                    ~/.gemini/settings.json
 *   qwen                      ~/.qwen/settings.json
 *   opencode                  ~/.config/opencode/opencode.json
 *
 * A file is only ever created: one that exists (the user's, or spd's
 * from an earlier run) is left as it is.  None holds a key.
 */
#ifndef SPD_DAEMON_AGENTCONF_H
#define SPD_DAEMON_AGENTCONF_H

#include <stddef.h>

struct strv;

/* Of argv's first elements, how many are looked at for the agent's
 * program: a wrapper (env, node, a script of the user's) comes first. */
#define AGENTCONF_ARGV_SCAN 8
/* Largest file written: settings are a few hundred bytes. */
#define AGENTCONF_FILE_MAX 4096

/*
 * The agent argv runs (argv[0], or the first of its first
 * AGENTCONF_ARGV_SCAN elements whose base name, less .js, .mjs, .cjs or
 * .exe, is a known agent's), as a static name ("codex"), or NULL.
 */
const char *agentconf_recognise(char *const *argv, size_t argc);

/*
 * For the agent argv runs: create its settings files under home (a
 * directory spd made; every component is opened without following a
 * symbolic link, so a link the agent left there cannot send a write
 * elsewhere) for a broker at http://127.0.0.1:port, and push its
 * environment variables onto env.  Returns the agent's name (static), or
 * NULL when none is recognised.  A file that could not be made is
 * logged and left out: the run still has the broker's variables, and its
 * network is the broker only, so nothing reaches a provider but through
 * spd; -ENOMEM (env could not grow) in *ret_err, else 0.
 */
const char *agentconf_prepare(const char *home, char *const *argv, size_t argc,
			      unsigned port, struct strv *env, int *ret_err);

#endif
