/*
 * The operator's secrets: provider keys from the environment file
 * (config_dir/environment, NAME=value lines, mode 0600) and secret-looking
 * variables of spd's own environment.  They become the redaction set that
 * every byte leaving spd passes (replies, notifications, journal, log),
 * and the list of values no run's environment may carry.
 */
#ifndef SPD_DAEMON_SECRETS_H
#define SPD_DAEMON_SECRETS_H

#include <stddef.h>

struct spd;

/* Longest environment file: a list of keys, not a data store. */
#define SECRETS_FILE_MAX (256 * 1024)
/* Most secrets: each adds a few hundred automaton patterns. */
#define SECRETS_MAX 512

/*
 * Load the secrets and build spd->redact and spd->secret_values.  A
 * missing environment file is fine; one with group or other access, not
 * owned by the operator, or not a regular file is refused (-EPERM), as is
 * a malformed line (-EINVAL, errbuf says which).  Returns 0 or -errno.
 */
int secrets_load(struct spd *spd, char *errbuf, size_t errlen);
/* Free what secrets_load built. */
void secrets_free(struct spd *spd);

/*
 * Redact text for the journal (the journal's filter): a malloc'd copy
 * with every secret replaced, or NULL when nothing matched.
 */
char *secrets_journal_filter(void *data, const char *text);

#endif
