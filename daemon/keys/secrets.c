/*
 * Provider keys and other secrets (daemon/keys/secrets.h): loaded from
 * the environment file and spd's own environment, never logged, turned
 * into the redaction set every output and journal row passes.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/log.h"
#include "daemon/keys/secrets.h"
#include "daemon/spd.h"
#include "common/envscrub.h"
#include "common/redact.h"
#include "common/util.h"

extern char **environ;

struct secret_meta {
	char name[REDACT_MAX_NAME + 1];
	char source[192];
	char fingerprint[17]; /* first 8 bytes of BLAKE2b, hex */
};

/*
 * One generation of the operator's secrets (environment file, key files,
 * spd's environment): the values and the redaction set built from them,
 * read by secrets_load alone.  The values spd mints (session tokens,
 * turn keys) have a small set of their own, rebuilt from spd->minted
 * alone when one comes or goes; the set in force (spd->redact) is the
 * chain of the two (redact_set_chain), so a turn leaves the operator's
 * set as it is.  A set replaced is freed at once: it lives on only as
 * long as a stream or job still holds a reference to it
 * (redact_set_ref), so turns begun and ended by the thousand leave
 * nothing behind.
 */
struct secrets {
	struct redact_set *set;
	char **values; /* sodium_malloc'd, NULL-terminated */
	size_t n;
	struct secret_meta *meta;
	/* The generations built so far (secrets_base_builds). */
	unsigned long builds;
	struct redact_set *minted; /* spd->minted's values */
	struct redact_set *chain;  /* set, then minted: spd->redact */
	/* values, then spd->minted's values, NULL-terminated:
	 * spd->secret_values (borrowed pointers). */
	char **all;
	size_t all_cap;
};

static void gen_free(struct secrets *g)
{
	if (!g)
		return;
	redact_set_free(g->chain);
	redact_set_free(g->minted);
	redact_set_free(g->set);
	for (size_t i = 0; g->values && i < g->n; i++)
		sodium_free(g->values[i]); /* wipes */
	free(g->values);
	free(g->meta);
	free(g->all);
	free(g);
}

static int gen_add(struct secrets *g, struct redact_builder *b,
		   const char *name, const char *value, size_t len,
		   const char *source, char *errbuf, size_t errlen)
{
	unsigned char h[8];
	char **nv;
	struct secret_meta *nm;
	int r;

	for (size_t i = 0; i < g->n; i++)
		if (strlen(g->values[i]) == len &&
		    sodium_memcmp(g->values[i], value, len) == 0)
			return 0; /* the same value from two places */
	if (g->n >= SECRETS_MAX) {
		snprintf(errbuf, errlen, "more than %d secrets", SECRETS_MAX);
		return -E2BIG;
	}
	r = redact_builder_add(b, name, value, len);
	if (r < 0) {
		snprintf(errbuf, errlen,
			 "%s: %s cannot be registered for redaction (%s)",
			 source, name,
			 r == -EINVAL
			     ? "shorter than 8 characters or a bad name"
			 : r == -E2BIG ? "longer than 8 KiB"
				       : strerror(-r));
		return r;
	}
	nv = realloc(g->values, (g->n + 2) * sizeof(*nv));
	if (!nv)
		return -ENOMEM;
	g->values = nv;
	nm = realloc(g->meta, (g->n + 1) * sizeof(*nm));
	if (!nm)
		return -ENOMEM;
	g->meta = nm;
	/* Locked (never swapped), guarded, wiped on free. */
	nv[g->n] = sodium_malloc(len + 1);
	if (!nv[g->n])
		return -ENOMEM;
	memcpy(nv[g->n], value, len);
	nv[g->n][len] = '\0';
	snprintf(nm[g->n].name, sizeof(nm[g->n].name), "%s", name);
	snprintf(nm[g->n].source, sizeof(nm[g->n].source), "%s", source);
	crypto_generichash(h, sizeof(h), (const unsigned char *)value, len,
			   NULL, 0);
	sodium_bin2hex(nm[g->n].fingerprint, sizeof(nm[g->n].fingerprint), h,
		       sizeof(h));
	g->n++;
	nv[g->n] = NULL;
	return 0;
}

/* Read a whole file that must be private to the operator. */
static int read_private(const char *path, bool must_be_private, char **ret,
			char *errbuf, size_t errlen)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	struct stat st;
	char *text;
	ssize_t n;

	if (fd < 0) {
		if (errno == ENOENT && must_be_private) {
			*ret = NULL;
			return 0;
		}
		snprintf(errbuf, errlen, "%s: %s", path, strerror(errno));
		return -errno;
	}
	if (fstat(fd, &st) < 0)
		return -errno;
	/* Keys readable by another user are keys already leaked: refuse to
	 * start rather than bless them. */
	if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    (must_be_private && (st.st_mode & 077))) {
		snprintf(
		    errbuf, errlen,
		    "%s must be a regular file owned by you with mode 0600 "
		    "(it is %04o, owner uid %u): chmod 600 %s",
		    path, (unsigned)(st.st_mode & 07777), (unsigned)st.st_uid,
		    path);
		return -EPERM;
	}
	if (st.st_size > SECRETS_FILE_MAX) {
		snprintf(errbuf, errlen, "%s is larger than %d bytes", path,
			 SECRETS_FILE_MAX);
		return -E2BIG;
	}
	text = sodium_malloc((size_t)st.st_size + 1);
	if (!text)
		return -ENOMEM;
	n = read(fd, text, (size_t)st.st_size);
	if (n < 0) {
		sodium_free(text);
		return -errno;
	}
	text[n] = '\0';
	*ret = text;
	return 0;
}

static bool name_ok(const char *s, size_t n)
{
	if (n == 0 || n > REDACT_MAX_NAME)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!(isalnum((unsigned char)c) || c == '_' ||
		      (i > 0 && (c == '.' || c == '-'))))
			return false;
	}
	return true;
}

static int load_env_file(struct spd *spd, struct secrets *g,
			 struct redact_builder *b, char *errbuf, size_t errlen)
{
	char *text = NULL, *line, *save = NULL, src[160];
	int r, lineno = 0;

	r = read_private(spd->paths.env_path, true, &text, errbuf, errlen);
	if (r < 0 || !text)
		return r;
	for (line = strtok_r(text, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		char *eq, *val;
		size_t vlen;

		lineno++;
		line[strcspn(line, "\r")] = '\0';
		while (*line == ' ' || *line == '\t')
			line++;
		if (*line == '#' || *line == '\0')
			continue;
		if (strncmp(line, "export ", 7) == 0)
			line += 7;
		eq = strchr(line, '=');
		if (!eq || !name_ok(line, (size_t)(eq - line))) {
			snprintf(errbuf, errlen,
				 "environment file %s, line %d: expected "
				 "NAME=value (NAME of letters, digits, _ . -)",
				 spd->paths.env_path, lineno);
			r = -EINVAL;
			break;
		}
		*eq = '\0';
		val = eq + 1;
		vlen = strlen(val);
		if (vlen >= 2 && ((val[0] == '"' && val[vlen - 1] == '"') ||
				  (val[0] == '\'' && val[vlen - 1] == '\''))) {
			val++;
			vlen -= 2;
		}
		snprintf(src, sizeof(src), "environment file, line %d", lineno);
		/* Every value in this file is a key, whatever its name. */
		r = gen_add(g, b, line, val, vlen, src, errbuf, errlen);
		if (r < 0)
			break;
	}
	sodium_free(text);
	return r < 0 ? r : 0;
}

static bool plain_number(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!isdigit((unsigned char)s[i]))
			return false;
	return true;
}

static int load_key_file(const char *path, struct secrets *g,
			 struct redact_builder *b, char *errbuf, size_t errlen)
{
	char *text = NULL, *line, *save = NULL, name[REDACT_MAX_NAME + 1],
	     src[256];
	const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
	int r, lineno = 0;

	r = read_private(path, false, &text, errbuf, errlen);
	if (r < 0)
		return r;
	for (line = strtok_r(text, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		size_t n, k = 0;

		lineno++;
		line[strcspn(line, "\r")] = '\0';
		while (*line == ' ' || *line == '\t')
			line++;
		n = strlen(line);
		while (n && (line[n - 1] == ' ' || line[n - 1] == '\t'))
			line[--n] = '\0';
		if (n < REDACT_MIN_LEN || plain_number(line, n))
			continue;
		/* The marker names the file and line, never the value. */
		k = (size_t)snprintf(name, sizeof(name), "keyfile.");
		for (const char *p = base; *p && k < sizeof(name) - 8; p++)
			name[k++] = (isalnum((unsigned char)*p) || *p == '.' ||
				     *p == '-' || *p == '_')
					? *p
					: '_';
		snprintf(name + k, sizeof(name) - k, ".%d", lineno);
		snprintf(src, sizeof(src), "key file %s, line %d", path,
			 lineno);
		r = gen_add(g, b, name, line, n, src, errbuf, errlen);
		if (r < 0)
			break;
	}
	sodium_free(text);
	return r < 0 ? r : 0;
}

/* spd's own secret-looking variables (a key exported in the operator's
 * shell).  SPD_* name spd's directories: they are kept from runs by
 * envscrub but are not keys. */
static int load_environ(struct secrets *g, struct redact_builder *b,
			char *errbuf, size_t errlen)
{
	for (char **e = environ; *e; e++) {
		const char *eq = strchr(*e, '=');
		size_t nlen = eq ? (size_t)(eq - *e) : 0;
		char name[REDACT_MAX_NAME + 1];
		int r;

		if (!eq || strncmp(*e, "SPD_", 4) == 0 ||
		    !envscrub_name_is_secret(*e, nlen) ||
		    strlen(eq + 1) < REDACT_MIN_LEN || !name_ok(*e, nlen))
			continue;
		snprintf(name, sizeof(name), "%.*s", (int)nlen, *e);
		r = gen_add(g, b, name, eq + 1, strlen(eq + 1),
			    "spd's environment", errbuf, errlen);
		if (r < 0)
			return r;
	}
	return 0;
}

/* The operator's secrets, from the files and the environment, into g
 * and b. */
static int gen_fill(struct spd *spd, struct secrets *g,
		    struct redact_builder *b, char *errbuf, size_t errlen)
{
	int r = load_env_file(spd, g, b, errbuf, errlen);

	for (size_t i = 0;
	     r == 0 && spd->config.key_files && spd->config.key_files[i]; i++)
		r = load_key_file(spd->config.key_files[i], g, b, errbuf,
				  errlen);
	if (r == 0)
		r = load_environ(g, b, errbuf, errlen);
	return r;
}

/* Room in g->all for g's values, n minted values and the NULL.  Its
 * content stays as it was.  Returns 0 or -ENOMEM. */
static int all_reserve(struct secrets *g, size_t n)
{
	size_t need = g->n + n + 1;
	char **a;

	if (need <= g->all_cap)
		return 0;
	a = realloc(g->all, 2 * need * sizeof(*a));
	if (!a)
		return -ENOMEM;
	g->all = a;
	g->all_cap = 2 * need;
	return 0;
}

/* g->all as g's values then the n minted values (room reserved). */
static void all_fill(struct secrets *g, const struct secret_minted *minted,
		     size_t n)
{
	for (size_t i = 0; i < g->n; i++)
		g->all[i] = g->values[i];
	for (size_t i = 0; i < n; i++)
		g->all[g->n + i] = minted[i].value;
	g->all[g->n + n] = NULL;
}

/* The set of spd's minted values, spd->minted as it is now. */
static int minted_build(struct spd *spd, struct redact_set **ret)
{
	struct redact_builder *b = NULL;
	int r = redact_builder_new(&b);

	for (size_t i = 0; r == 0 && i < spd->n_minted; i++)
		r = redact_builder_add(b, spd->minted[i].name,
				       spd->minted[i].value,
				       strlen(spd->minted[i].value));
	if (r < 0) {
		redact_builder_free(b);
		return r;
	}
	return redact_builder_build(b, ret);
}

/* Put g's set chained with minted (a reference of g's own is taken) in
 * force, with spd->minted's values: spd->redact, spd->secret_values and
 * the log's set.  Returns 0 or -ENOMEM with nothing changed. */
static int gen_arm(struct spd *spd, struct secrets *g,
		   struct redact_set *minted)
{
	struct redact_set *chain = NULL, *old_chain, *old_minted;
	int r;

	r = all_reserve(g, spd->n_minted);
	/* It may have moved. */
	if (spd->secrets == g)
		spd->secret_values = g->all;
	if (r == 0)
		r = redact_set_chain(g->set, minted, &chain);
	if (r < 0)
		return r;
	all_fill(g, spd->minted, spd->n_minted);
	old_chain = g->chain;
	old_minted = g->minted;
	g->chain = chain;
	g->minted = redact_set_ref(minted);
	spd->secrets = g;
	spd->redact = chain;
	spd->secret_values = g->all;
	/* The log takes its own reference before the old set's owner lets
	 * go of it. */
	log_set_redact(chain);
	redact_set_free(old_chain);
	redact_set_free(old_minted);
	return 0;
}

/* Build the next generation of the operator's secrets from the files
 * and put it in force with the minted values; the one it replaces is
 * freed. */
static int gen_install(struct spd *spd, char *errbuf, size_t errlen)
{
	struct redact_builder *b = NULL;
	struct secrets *g = calloc(1, sizeof(*g)), *old = spd->secrets;
	struct redact_set *minted = NULL;
	int r;

	if (!g)
		return -ENOMEM;
	if (sodium_init() < 0) {
		free(g);
		snprintf(errbuf, errlen, "libsodium cannot initialise");
		return -EIO;
	}
	r = redact_builder_new(&b);
	if (r < 0)
		goto fail;
	r = gen_fill(spd, g, b, errbuf, errlen);
	if (r < 0)
		goto fail;
	r = redact_builder_build(b, &g->set);
	b = NULL;
	if (r < 0) {
		snprintf(errbuf, errlen, "cannot build the redaction set: %s",
			 strerror(-r));
		goto fail;
	}
	g->builds = (old ? old->builds : 0) + 1;
	/* The minted values' set carries over as it is. */
	if (old && old->minted)
		minted = redact_set_ref(old->minted);
	else if ((r = minted_build(spd, &minted)) < 0)
		goto fail;
	r = gen_arm(spd, g, minted);
	redact_set_free(minted);
	if (r < 0)
		goto fail;
	gen_free(old);
	return 0;
fail:
	if (r < 0 && !errbuf[0])
		snprintf(errbuf, errlen, "%s", strerror(-r));
	redact_builder_free(b);
	gen_free(g);
	return r;
}

int secrets_load(struct spd *spd, char *errbuf, size_t errlen)
{
	if (errlen)
		errbuf[0] = '\0';
	return gen_install(spd, errbuf, errlen);
}

/* The minted values changed: their set is built again, the operator's
 * stays as it is. */
static int secrets_rebuild(struct spd *spd)
{
	struct redact_set *minted = NULL;
	char err[256] = "";
	int r;

	/* Not loaded yet: load (which takes spd->minted as it is). */
	if (!spd->secrets)
		return gen_install(spd, err, sizeof(err));
	r = minted_build(spd, &minted);
	if (r < 0)
		return r;
	r = gen_arm(spd, spd->secrets, minted);
	redact_set_free(minted);
	return r;
}

unsigned long secrets_base_builds(const struct spd *spd)
{
	return spd->secrets ? spd->secrets->builds : 0;
}

int secrets_add_minted(struct spd *spd, const char *name, const char *value)
{
	struct secret_minted *nm;
	size_t n = strlen(value);
	int r;

	if ((spd->secrets ? spd->secrets->n : 0) + spd->n_minted >= SECRETS_MAX)
		return -E2BIG;
	nm = realloc(spd->minted, (spd->n_minted + 1) * sizeof(*nm));
	if (!nm)
		return -ENOMEM;
	spd->minted = nm;
	nm[spd->n_minted].value = sodium_malloc(n + 1);
	if (!nm[spd->n_minted].value)
		return -ENOMEM;
	memcpy(nm[spd->n_minted].value, value, n + 1);
	snprintf(nm[spd->n_minted].name, sizeof(nm[spd->n_minted].name), "%s",
		 name);
	spd->n_minted++;
	r = secrets_rebuild(spd);
	if (r < 0) {
		/* Keep the old set; the token still never reaches a log or
		 * the journal by construction (params are stripped). */
		spd->n_minted--;
		sodium_free(nm[spd->n_minted].value);
		return r;
	}
	return 0;
}

bool secrets_has_minted(const struct spd *spd, const char *name)
{
	for (size_t i = 0; i < spd->n_minted; i++)
		if (strcmp(spd->minted[i].name, name) == 0)
			return true;
	return false;
}

int secrets_drop_minted(struct spd *spd, const char *name)
{
	struct secret_minted gone;
	size_t i;
	int r;

	for (i = 0; i < spd->n_minted; i++)
		if (strcmp(spd->minted[i].name, name) == 0)
			break;
	if (i == spd->n_minted)
		return -ENOENT;
	gone = spd->minted[i];
	spd->minted[i] = spd->minted[spd->n_minted - 1];
	spd->n_minted--;
	r = secrets_rebuild(spd);
	if (r < 0) {
		/* Keep redacting it: a value too many is harmless. */
		spd->minted[spd->n_minted++] = gone;
		return r;
	}
	sodium_free(gone.value);
	return 0;
}

const char *secrets_value(struct spd *spd, const char *name)
{
	struct secrets *g = spd->secrets;

	for (size_t i = 0; g && i < g->n; i++)
		if (strcmp(g->meta[i].name, name) == 0)
			return g->values[i];
	return NULL;
}

void secrets_free(struct spd *spd)
{
	struct secrets *g = spd->secrets;

	for (size_t i = 0; i < spd->n_minted; i++)
		sodium_free(spd->minted[i].value);
	free(spd->minted);
	spd->minted = NULL;
	spd->n_minted = 0;

	gen_free(g);
	spd->secrets = NULL;
	spd->redact = NULL;
	spd->secret_values = NULL;
}

json_t *secrets_list_json(struct spd *spd)
{
	json_t *a = json_array();
	struct secrets *g = spd->secrets;

	for (size_t i = 0; g && i < g->n; i++)
		json_array_append_new(
		    a, json_pack("{s:s, s:s, s:s}", "name", g->meta[i].name,
				 "source", g->meta[i].source, "fingerprint",
				 g->meta[i].fingerprint));
	for (size_t i = 0; i < spd->n_minted; i++) {
		const char *v = spd->minted[i].value;
		unsigned char h[8];
		char fp[17];

		crypto_generichash(h, sizeof(h), (const unsigned char *)v,
				   strlen(v), NULL, 0);
		sodium_bin2hex(fp, sizeof(fp), h, sizeof(h));
		json_array_append_new(
		    a, json_pack("{s:s, s:s, s:s}", "name", spd->minted[i].name,
				 "source", "minted by spd", "fingerprint", fp));
	}
	return a;
}

char *secrets_journal_filter(void *data, const char *text)
{
	struct spd *spd = data;
	char *out = NULL;
	size_t len;
	int r;

	if (!spd->redact)
		return NULL;
	r = redact_buf(spd->redact, text, strlen(text), &out, &len);
	if (r == 0) {
		free(out);
		return NULL;
	}
	if (r < 0) /* never store what could not be checked */
		return strdup("[withheld: redaction failed]");
	return out;
}
