/*
 * The names one directory holds, read once, as a filter that can say "not
 * there" without a lookup per name.  The mount plan reads the home
 * directory's so that its fifty-odd credential locations, most of which
 * a home does not have, cost no lstat each (mount.c, bench/README.md).
 *
 * A filter answers "maybe" for every name it holds and, by collision, for
 * a few it does not; "no" only for a name no lookup in that directory
 * could find.  It vouches for that only where the listing is the whole
 * truth: a filesystem whose lookups are exact byte compares (ext4,
 * tmpfs, btrfs, xfs), a directory not case-folded, names compared
 * without ASCII case (xfs's ascii-ci), a listing read whole.  Anywhere
 * else it answers "maybe" for everything, and the caller looks up.
 */
#ifndef SPD_SANDBOXD_NAMES_H
#define SPD_SANDBOXD_NAMES_H

#include <stdbool.h>
#include <stdint.h>

/* Bits of the filter: some 5% of false "maybe" with 200 names. */
#define DIR_NAMES_BITS 4096

struct dir_names {
	uint64_t bits[DIR_NAMES_BITS / 64];
	bool exact; /* false: every answer is "maybe" */
};

/* Reads the names of directory path into ret.  Never fails: a listing
 * it cannot trust leaves ret->exact false. */
void dir_names_read(const char *path, struct dir_names *ret);

/* Whether the first component of rel (up to a '/') may name an entry. */
bool dir_names_may_have(const struct dir_names *n, const char *rel);

#endif
