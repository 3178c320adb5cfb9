/*
 * The one list of environment variables never passed to a sandboxed
 * command (docs/design.md, "Sandbox defaults").  Shared by spd, which chooses
 * a run's environment, and sandboxd, which scrubs it again before exec so
 * that a bug in spd cannot leak a key.
 */
#ifndef SPD_COMMON_ENVSCRUB_H
#define SPD_COMMON_ENVSCRUB_H

#include <stdbool.h>
#include <stddef.h>

/*
 * True when a variable of this name must never reach a child: *_API_KEY,
 * *_TOKEN, *SECRET*, *PASSWORD*, *PASSWD*, *CREDENTIAL*, AWS_*, ANTHROPIC_*,
 * OPENAI_*, SSH_AUTH_SOCK, GIT_ASKPASS, SSH_ASKPASS and the like.  The
 * match ignores letter case.  name is the part before '='; namelen its
 * length.  Async-signal-safe (no allocation, no locale).
 */
bool envscrub_name_is_secret(const char *name, size_t namelen);

/*
 * True when an entry "NAME=value" must be dropped: its name is secret, it
 * has no '=', or its value equals one of the NULL-terminated values in
 * secrets (may be NULL) whatever the name.  Async-signal-safe.
 */
bool envscrub_entry_drop(const char *entry, const char *const *secrets);

/*
 * True when entry is one of the few variables an agent run in broker mode
 * (spctl agent) gets despite their secret-looking names: ANTHROPIC_API_KEY,
 * ANTHROPIC_AUTH_TOKEN, OPENAI_API_KEY or GEMINI_API_KEY holding a turn
 * key ("sk-spd-" and 64 hex digits, worth nothing outside that one turn),
 * or ANTHROPIC_BASE_URL, OPENAI_BASE_URL or GOOGLE_GEMINI_BASE_URL holding
 * http://127.0.0.1:port (optionally with "/v1").  Anything else, a real provider key in
 * particular, is false.  Async-signal-safe.
 */
bool envscrub_broker_entry_ok(const char *entry, unsigned port);

#endif
