/*
 * The names one directory holds, as a filter (sandboxd/linux/names.h).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/magic.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "sandboxd/linux/names.h"

/* Listings longer than this many reads (some 1,500 names) are not kept:
 * reading them would cost more than the lookups they save. */
#define NAMES_READS_MAX 2
#define NAMES_BUF 32768

/* FNV-1a of the name, ASCII letters folded to lower case. */
static uint32_t name_hash(const char *s, size_t len)
{
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c >= 'A' && c <= 'Z')
			c = (unsigned char)(c - 'A' + 'a');
		h = (h ^ c) * 16777619u;
	}
	return h ^ (h >> 16);
}

static void names_add(struct dir_names *n, const char *s, size_t len)
{
	uint32_t b = name_hash(s, len) % DIR_NAMES_BITS;

	n->bits[b / 64] |= 1ULL << (b % 64);
}

/* Whether lookups in the directory open on fd find exactly the names its
 * listing holds: a filesystem that compares names byte for byte (xfs's
 * ascii-ci is covered by the folded hash) and no case-folding on it. */
static bool names_exact_fs(int fd)
{
	struct statfs sf;
	int flags = 0;

	if (fstatfs(fd, &sf) < 0)
		return false;
	switch ((unsigned long)sf.f_type) {
	case EXT4_SUPER_MAGIC:
	case TMPFS_MAGIC:
	case BTRFS_SUPER_MAGIC:
	case XFS_SUPER_MAGIC:
		break;
	default:
		return false;
	}
	if (ioctl(fd, FS_IOC_GETFLAGS, &flags) < 0)
		return false;
	return !(flags & FS_CASEFOLD_FL);
}

void dir_names_read(const char *path, struct dir_names *ret)
{
	static char buf[NAMES_BUF] __attribute__((aligned(8)));
	int fd, reads = 0;
	ssize_t got;

	memset(ret, 0, sizeof(*ret));
	fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return;
	if (!names_exact_fs(fd))
		goto out;
	while ((got = getdents64(fd, buf, sizeof(buf))) > 0) {
		if (++reads > NAMES_READS_MAX)
			goto out;
		for (ssize_t off = 0; off < got;) {
			struct dirent64 *d = (struct dirent64 *)(buf + off);

			if (d->d_reclen == 0)
				goto out;
			names_add(ret, d->d_name, strlen(d->d_name));
			off += d->d_reclen;
		}
	}
	ret->exact = got == 0;
out:
	if (!ret->exact)
		memset(ret->bits, 0, sizeof(ret->bits));
	close(fd);
}

bool dir_names_may_have(const struct dir_names *n, const char *rel)
{
	const char *slash = strchr(rel, '/');
	size_t len = slash ? (size_t)(slash - rel) : strlen(rel);
	uint32_t b;

	if (!n->exact)
		return true;
	b = name_hash(rel, len) % DIR_NAMES_BITS;
	return (n->bits[b / 64] >> (b % 64)) & 1;
}
