/*
 * The table of every section and key spd reads from spd.conf and from a
 * project's .spd.conf, and the one validator over it.  libgit2 reads
 * whatever a file holds; without this check a misspelt section or key
 * ([netwrok] deny-host, [sandbox] tiemout) would be read by nobody, and
 * a restriction the operator believes in would not be there.  The
 * readers (config.c, broker/, policy/policy.c, proxy/project.c,
 * session/session_verify.c) each read their own keys; a key one of them
 * reads must have its row here.
 */
#ifndef SPD_DAEMON_CONFTAB_H
#define SPD_DAEMON_CONFTAB_H

#include <stdbool.h>
#include <stddef.h>

/* Which file is checked: the keys of one are not all the other's. */
enum conftab_file {
	CONFTAB_SPD_CONF = 1, /* the operator's spd.conf */
	CONFTAB_PROJECT = 2,  /* a workspace's .spd.conf */
};

struct git_config;

/*
 * Check every entry of gc, read from path, against the table of file:
 * an unknown section or key, a section that belongs in the other file,
 * a host key given a URL.  Returns 0, or -EINVAL with one message in
 * errbuf: "SHOWN:LINE: what; the fix" (the line found by scanning path's
 * text; without ":LINE" when it cannot be found, e.g. in an included
 * file).  shown is the name the message gives the file (NULL: path).
 * Returns -ENOMEM or -EIO (gc cannot be walked) with a message too.
 */
int conftab_check(struct git_config *gc, const char *path, const char *shown,
		  enum conftab_file file, char *errbuf, size_t errlen);

/*
 * The one reader of spd.conf and a project's .spd.conf: libgit2 started
 * once per process, the file opened, a project's [include] refused (an
 * included file would not be a protected path), every entry checked
 * against the table (conftab_check).  Returns 0 with *ret (free with
 * git_config_free), -ENOENT when there is no such file (nothing in
 * errbuf), or -EINVAL / -EIO / -ENOMEM with one message in errbuf.
 */
int conftab_open(const char *path, const char *shown, enum conftab_file file,
		 struct git_config **ret, char *errbuf, size_t errlen);

/* Call cb for every key of the table (git's own [include] aside), with
 * its section, whether the section takes a name ([provider "NAME"]) and
 * the files (enum conftab_file bits) it may appear in: what spd.conf(5)
 * must document (tests/unit/test_common.c checks it does). */
void conftab_each(void (*cb)(void *data, const char *section, bool named,
			     const char *key, unsigned files),
		  void *data);

#endif
