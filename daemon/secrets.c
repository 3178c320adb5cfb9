#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "secrets.h"
#include "spd.h"
#include "common/envscrub.h"
#include "common/redact.h"
#include "common/util.h"

extern char **environ;

static int read_env_file(const char *path, char **ret, char *errbuf,
			 size_t errlen)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	struct stat st;
	char *text;
	ssize_t n;

	if (fd < 0) {
		if (errno == ENOENT) {
			*ret = NULL;
			return 0;
		}
		snprintf(errbuf, errlen, "environment file %s: %s", path,
			 strerror(errno));
		return -errno;
	}
	if (fstat(fd, &st) < 0)
		return -errno;
	/* Keys readable by another user are keys already leaked: refuse to
	 * start rather than bless them. */
	if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    (st.st_mode & 077)) {
		snprintf(errbuf, errlen,
			 "environment file %s must be a regular file owned by "
			 "you with mode 0600 (it is %04o): chmod 600 %s",
			 path, (unsigned)(st.st_mode & 07777), path);
		return -EPERM;
	}
	if (st.st_size > SECRETS_FILE_MAX) {
		snprintf(errbuf, errlen, "environment file %s is larger than %d bytes",
			 path, SECRETS_FILE_MAX);
		return -E2BIG;
	}
	text = malloc((size_t)st.st_size + 1);
	if (!text)
		return -ENOMEM;
	n = read(fd, text, (size_t)st.st_size);
	if (n < 0) {
		free(text);
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
		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		      (c >= '0' && c <= '9') || c == '_' ||
		      (i > 0 && (c == '.' || c == '-'))))
			return false;
	}
	return true;
}

static int push_value(struct spd *spd, size_t *n, const char *v, size_t len)
{
	char **nv;

	if (*n >= SECRETS_MAX)
		return -E2BIG;
	nv = realloc(spd->secret_values, (*n + 2) * sizeof(*nv));
	if (!nv)
		return -ENOMEM;
	spd->secret_values = nv;
	if (!(nv[*n] = strndup(v, len)))
		return -ENOMEM;
	nv[++*n] = NULL;
	return 0;
}

int secrets_load(struct spd *spd, char *errbuf, size_t errlen)
{
	struct redact_builder *b = NULL;
	char *text = NULL, *line, *save = NULL;
	size_t nvals = 0, n_env = 0;
	char **own_env = NULL;
	int r, lineno = 0;

	r = read_env_file(spd->paths.env_path, &text, errbuf, errlen);
	if (r < 0)
		return r;
	/* spd's own SPD_* variables name directories, not secrets: they are
	 * kept from runs (envscrub) but must not be redacted as keys. */
	for (char **e = environ; *e; e++)
		n_env++;
	own_env = calloc(n_env + 1, sizeof(*own_env));
	if (!own_env) {
		r = -ENOMEM;
		goto out;
	}
	n_env = 0;
	for (char **e = environ; *e; e++)
		if (strncmp(*e, "SPD_", 4) != 0)
			own_env[n_env++] = *e;
	r = redact_builder_new(&b);
	if (r < 0)
		goto out;
	for (line = text ? strtok_r(text, "\n", &save) : NULL; line;
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
				 "NAME=value",
				 spd->paths.env_path, lineno);
			r = -EINVAL;
			goto out;
		}
		*eq = '\0';
		val = eq + 1;
		vlen = strlen(val);
		if (vlen >= 2 && ((val[0] == '"' && val[vlen - 1] == '"') ||
				  (val[0] == '\'' && val[vlen - 1] == '\''))) {
			val++;
			vlen -= 2;
		}
		/* Every value in this file is a key, whatever its name. */
		if (vlen < REDACT_MIN_LEN) {
			snprintf(errbuf, errlen,
				 "environment file %s, line %d: %s is shorter "
				 "than %d characters and could not be redacted",
				 spd->paths.env_path, lineno, line,
				 REDACT_MIN_LEN);
			r = -EINVAL;
			goto out;
		}
		r = redact_builder_add(b, line, val, vlen);
		if (r < 0) {
			snprintf(errbuf, errlen,
				 "environment file %s, line %d: %s cannot be "
				 "registered for redaction: %s",
				 spd->paths.env_path, lineno, line, strerror(-r));
			goto out;
		}
		r = push_value(spd, &nvals, val, vlen);
		if (r < 0)
			goto out;
	}
	/* spd's own secret-looking variables (a key exported in the
	 * operator's shell) are redacted too. */
	r = redact_builder_add_env(b, (const char *const *)own_env);
	if (r < 0) {
		snprintf(errbuf, errlen,
			 "a secret in spd's environment cannot be redacted: %s",
			 strerror(-r));
		goto out;
	}
	for (char **e = own_env; *e; e++) {
		const char *eq = strchr(*e, '=');
		if (eq && strlen(eq + 1) >= REDACT_MIN_LEN &&
		    envscrub_name_is_secret(*e, (size_t)(eq - *e)))
			if ((r = push_value(spd, &nvals, eq + 1, strlen(eq + 1))) < 0)
				goto out;
	}
	r = redact_builder_build(b, &spd->redact);
	b = NULL;
	if (r < 0)
		snprintf(errbuf, errlen, "cannot build the redaction set: %s",
			 strerror(-r));
out:
	free(own_env);
	redact_builder_free(b);
	if (text) {
		memset(text, 0, strlen(text));
		free(text);
	}
	return r < 0 ? r : 0;
}

void secrets_free(struct spd *spd)
{
	redact_set_free(spd->redact);
	spd->redact = NULL;
	for (size_t i = 0; spd->secret_values && spd->secret_values[i]; i++) {
		memset(spd->secret_values[i], 0, strlen(spd->secret_values[i]));
		free(spd->secret_values[i]);
	}
	free(spd->secret_values);
	spd->secret_values = NULL;
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
