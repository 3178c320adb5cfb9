/*
 * A per-file summary of a unified diff, as `git diff --stat` prints it,
 * computed from the diff's text alone (spctl session diff --stat): spd
 * sends the text, and spctl holds no git.
 */
#ifndef SPD_CLIENT_DIFFSTAT_H
#define SPD_CLIENT_DIFFSTAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* The widest +/- bar printed for one file: a file of more changed lines
 * has its bar scaled, as git does, so that a line fits a terminal. */
#define DIFFSTAT_BAR_MAX 40

struct diffstat_file {
	char *path; /* the new name (the old one for a deleted file) */
	size_t added, removed;
	bool binary;
};

struct diffstat {
	struct diffstat_file *files;
	size_t n;
	size_t added, removed; /* over every file */
};

/*
 * Count the added and removed lines of each file of a unified diff in
 * git's format ("diff --git" sections, "---"/"+++" headers, "@@" hunks,
 * "Binary files … differ").  text may be NULL or empty: no files.  A diff
 * cut short counts what it holds.  Returns 0 and fills *ret (free with
 * diffstat_free), or -ENOMEM.
 */
int diffstat_parse(const char *text, struct diffstat *ret);
/* Free what diffstat_parse allocated; NULL allowed. */
void diffstat_free(struct diffstat *d);
/*
 * Print d to f as git diff --stat does: " path | N +++--" per file, then
 * " N files changed, N insertions(+), N deletions(-)".  Paths are the
 * agent's and go through termsafe.h.  Nothing for a diff without files.
 */
void diffstat_print(FILE *f, const struct diffstat *d);

#endif
