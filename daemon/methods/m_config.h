/*
 * spd.conf in force: what spctl doctor lists (daemon.config) and reading
 * it again while spd runs (daemon.reload, SIGHUP).
 */
#ifndef SPD_DAEMON_METHODS_M_CONFIG_H
#define SPD_DAEMON_METHODS_M_CONFIG_H

#include <jansson.h>
#include <stddef.h>

struct spd;

/* Remember spd.conf as spd read it at start (its hash and its values,
 * what the next reload compares against).  Returns 0 or -ENOMEM. */
int conf_remember(struct spd *spd);

/*
 * Read spd.conf again and put it in force for the next call: limits,
 * broker caps, providers and prices, network rules, hidden and writable
 * paths.  A key that cannot change while spd runs (CONFTAB_RESTART) keeps
 * its old value and is listed in the report's needs_restart.  A file
 * that does not read whole is refused whole: the old configuration stays
 * in force, nothing of the new is applied.  Either way the attempt is
 * journaled (config.reload) with the old and the new file's SHA-256.
 * by says who asked ("SIGHUP", "daemon.reload").  Returns 0 with the
 * report in *ret (the caller's), or -errno with the reason in errbuf.
 */
int conf_reload(struct spd *spd, const char *by, json_t **ret, char *errbuf,
		size_t errlen);

/* Forget what conf_remember and conf_reload kept (at exit). */
void conf_forget(struct spd *spd);

#endif
