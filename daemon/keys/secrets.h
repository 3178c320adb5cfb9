/*
 * The operator's secrets: provider keys from the environment file
 * (config_dir/environment, NAME=value lines, mode 0600), secret-looking
 * variables of spd's own environment, and the key files spd.conf names
 * ([secrets] file = PATH; each line of 8+ characters that is not a plain
 * number).  They become the redaction set every byte leaving spd passes
 * (replies, notifications, journal, log) and the list of values no run's
 * environment may carry.  Values live in locked, guarded memory
 * (sodium_malloc) and are wiped when dropped.
 */
#ifndef SPD_DAEMON_SECRETS_H
#define SPD_DAEMON_SECRETS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

struct spd;
struct call;

/* Longest environment or key file: a list of keys, not a data store. */
#define SECRETS_FILE_MAX (256 * 1024)
/* Most secrets: each adds a few hundred automaton patterns. */
#define SECRETS_MAX 512

/*
 * Load the secrets and install them as spd->redact and spd->secret_values
 * (the log's set too).  The previous generation is freed at once; its
 * redaction set lives on only while a stream or job in flight holds a
 * reference to it (redact_set_ref).  A missing environment file is fine; one with group
 * or other access, not owned by the operator, or not a regular file is
 * refused (-EPERM), as is a malformed line or a value that cannot be
 * redacted (-EINVAL); errbuf says which and why.  On failure nothing
 * changes.  Returns 0 or -errno.
 */
int secrets_load(struct spd *spd, char *errbuf, size_t errlen);
/*
 * A value spd minted (a session token, a turn key) joins the redaction
 * set from now on, and stays in it across reloads.  Only the small set of
 * minted values is rebuilt, chained after the operator's set, which
 * stays as it is: no file is read, no operator secret compiled again.  name: [A-Za-z0-9_.-], at most 64.
 * Returns 0, or -errno with the previous set still in force.
 */
int secrets_add_minted(struct spd *spd, const char *name, const char *value);
/* Whether a value called name was minted into the set. */
bool secrets_has_minted(const struct spd *spd, const char *name);
/*
 * A minted value that is no longer valid (a turn key after its turn)
 * leaves the redaction set.  Returns 0, -ENOENT when name was not minted,
 * or -errno with the value still in the set.
 */
int secrets_drop_minted(struct spd *spd, const char *name);
/*
 * The value of the secret called name in the set in force (an
 * environment-file or spd-environment key), or NULL.  Borrowed: valid
 * until the next load or secrets_free; never to be logged or journaled.
 */
const char *secrets_value(struct spd *spd, const char *name);

/*
 * How many times the operator's secrets were built into a redaction set
 * (secrets_load): a minted value coming or going builds only the small
 * set of minted values.  For tests.
 */
unsigned long secrets_base_builds(const struct spd *spd);

/* Free the generation in force and the minted values. */
void secrets_free(struct spd *spd);

/* Names, sources and fingerprints (never values) as a JSON array. */
json_t *secrets_list_json(struct spd *spd);

/*
 * Redact text for the journal (the journal's filter): a malloc'd copy
 * with every secret replaced, or NULL when nothing matched.
 */
char *secrets_journal_filter(void *data, const char *text);

#endif
