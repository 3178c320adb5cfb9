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
#include <stdint.h>

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

/* What a key's value is. */
enum conftab_type {
	CONFTAB_INT,  /* a whole number within [min, max] */
	CONFTAB_USD,  /* US dollars, a plain decimal such as 2.50 */
	CONFTAB_ENUM, /* one of the words of choices */
	CONFTAB_STR,  /* one string */
	CONFTAB_BOOL, /* true or false */
	CONFTAB_LIST, /* repeated: every value counts */
};

/* A change of the key takes effect only when spd starts again: a reload
 * reports it and keeps the value in force. */
#define CONFTAB_RESTART 1u

/*
 * One key of the table: where it may appear, what its value is, its
 * default and its one-line documentation.  A key with a field (off not
 * 0) is read into struct spd_config by config_load's one loop; the
 * others (lists, names, a provider's settings) by config.c's and the
 * broker's readers of their section, called from config_load.
 */
struct conftab_key {
	const char *section, *name;
	bool named;	/* the section takes a name: [provider "NAME"] */
	unsigned files; /* enum conftab_file bits */
	enum conftab_type type;
	/* INT: the range; USD: the range in picodollars (10^-12 USD). */
	int64_t min, max;
	const char *choices; /* ENUM: the words, separated by '|' */
	const char *def;     /* the default as spd.conf would write it; NULL:
				none (a list: empty) */
	const char *doc;     /* one line */
	unsigned flags;	     /* CONFTAB_RESTART */
	/* 1 + offsetof(struct spd_config, field), or 0; the field's size
	 * (INT: 4 or 8 bytes, unsigned but for int64_t; USD: int64_t;
	 * ENUM: an int holding the word's index; STR: a char *); INT's
	 * field holds value * scale (seconds kept as milliseconds). */
	size_t off, size;
	uint32_t scale;
};

/*
 * Call cb for every key of the table (git's own [include] aside), in the
 * table's order, until it returns non-zero: that value is returned, else
 * 0.  The table is what spd.conf(5) documents (tests/unit/test_common.c
 * checks both ways), what spctl doctor lists and what config_load reads.
 */
int conftab_each(int (*cb)(void *data, const struct conftab_key *k),
		 void *data);

/* The key name of section (a named section's by the section alone:
 * "provider", "url"; a key only [network "HOST"] has, "network",
 * "deny", too) into *ret; false when the table has none. */
bool conftab_find(const char *section, const char *name,
		  struct conftab_key *ret);

/* k's range as the messages and spctl doctor give it ("1..86400",
 * "0 to 1000000 USD"), or "" for a key of no range. */
void conftab_range(const struct conftab_key *k, char *buf, size_t len);

/* The SHA-256 of path's bytes (spd.conf: the operator's policy, rules,
 * limits and caps; no key value lives there) in hex into hex, "absent"
 * without the file or "unreadable"; 0 when hashed, else -errno. */
int conftab_file_sha256(const char *path, char hex[65]);

#endif
