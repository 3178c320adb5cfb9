/*
 * Known agent CLIs' settings in a session home (daemon/methods/agentconf.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/strv.h"
#include "common/util.h"
#include "daemon/methods/agentconf.h"
#include "daemon/log.h"

/* One file an agent reads, relative to its home; %1$u in text is the
 * broker's port. */
struct agent_file {
	const char *path;
	const char *text;
};

struct agent {
	const char *name;
	const char *const *programs; /* NULL-terminated */
	const struct agent_file *files;
	size_t n_files;
	const char *const *env; /* NULL-terminated */
};

/* Claude Code (and the ACP adapter built on its SDK) reads the broker's
 * variables as they are; these turn off everything but model calls. */
static const char *const claude_programs[] = {"claude", "claude-code-acp",
					      "claude-agent-acp", NULL};
static const char *const claude_env[] = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1",
    "DISABLE_TELEMETRY=1", "DISABLE_ERROR_REPORTING=1", NULL};

/* Codex ignores OPENAI_BASE_URL for its built-in provider (it tries a
 * WebSocket to OpenAI): a provider of its own, on the Responses API,
 * with the key from OPENAI_API_KEY.  Its sandbox (Landlock, seccomp)
 * would nest in spd's, which already confines every command. */
static const char *const codex_programs[] = {"codex", "codex-acp", NULL};
static const struct agent_file codex_files[] = {
    {".codex/config.toml",
     "# Written by spd (spctl agent) for this session: Codex reaches its\n"
     "# model through spd's broker, and spd's sandbox confines it.\n"
     "model_provider = \"spd\"\n"
     "sandbox_mode = \"danger-full-access\"\n"
     "check_for_update_on_startup = false\n"
     "# The provider's web search bills per use and for what it reads:\n"
     "# spd's broker refuses it (UNBOUNDED-OPTION).\n"
     "web_search = \"disabled\"\n"
     "\n"
     "[model_providers.spd]\n"
     "name = \"spd broker\"\n"
     "base_url = \"http://127.0.0.1:%1$u/v1\"\n"
     "env_key = \"OPENAI_API_KEY\"\n"
     "wire_api = \"responses\"\n"
     "\n"
     "[analytics]\n"
     "enabled = false\n"
     "\n"
     "[feedback]\n"
     "enabled = false\n"},
};
static const char *const codex_env[] = {NULL};

/* Gemini CLI stops with "Invalid auth method selected" without an auth
 * type in its settings, and in -p mode refuses a folder it was not told
 * to trust. */
static const char *const gemini_programs[] = {"gemini", NULL};
static const struct agent_file gemini_files[] = {
    {".gemini/settings.json",
     "{\n"
     "  \"security\": {\"auth\": {\"selectedType\": \"gemini-api-key\"}},\n"
     "  \"general\": {\"enableAutoUpdate\": false,\n"
     "              \"enableAutoUpdateNotification\": false},\n"
     "  \"privacy\": {\"usageStatisticsEnabled\": false},\n"
     "  \"telemetry\": {\"enabled\": false},\n"
     "  \"tools\": {\"sandbox\": false}\n"
     "}\n"},
};
static const char *const gemini_env[] = {"GEMINI_CLI_TRUST_WORKSPACE=true",
					 "GEMINI_SANDBOX=false", NULL};

/* Qwen Code, Gemini CLI's fork, on OpenAI's chat completions
 * (OPENAI_BASE_URL, OPENAI_API_KEY). */
static const char *const qwen_programs[] = {"qwen", NULL};
static const struct agent_file qwen_files[] = {
    {".qwen/settings.json",
     "{\n"
     "  \"security\": {\"auth\": {\"selectedType\": \"openai\"},\n"
     "               \"folderTrust\": {\"enabled\": false}},\n"
     "  \"general\": {\"enableAutoUpdate\": false,\n"
     "              \"enableAutoUpdateNotification\": false},\n"
     "  \"privacy\": {\"usageStatisticsEnabled\": false},\n"
     "  \"telemetry\": {\"enabled\": false},\n"
     "  \"tools\": {\"sandbox\": false}\n"
     "}\n"},
};
static const char *const qwen_env[] = {"GEMINI_SANDBOX=false", NULL};

/* OpenCode reads its providers' base URLs from its configuration only
 * (the SDKs' variables are not read). */
static const char *const opencode_programs[] = {"opencode", NULL};
static const struct agent_file opencode_files[] = {
    {".config/opencode/opencode.json",
     "{\n"
     "  \"$schema\": \"https://opencode.ai/config.json\",\n"
     "  \"autoupdate\": false,\n"
     "  \"share\": \"disabled\",\n"
     "  \"provider\": {\n"
     "    \"anthropic\": {\"options\": {\"baseURL\": "
     "\"http://127.0.0.1:%1$u/v1\"}},\n"
     "    \"openai\": {\"options\": {\"baseURL\": "
     "\"http://127.0.0.1:%1$u/v1\"}}\n"
     "  }\n"
     "}\n"},
};
static const char *const opencode_env[] = {
    "OPENCODE_DISABLE_AUTOUPDATE=1",   "OPENCODE_DISABLE_MODELS_FETCH=1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD=1", "OPENCODE_DISABLE_DEFAULT_PLUGINS=1",
    "OPENCODE_DISABLE_SHARE=1",	       NULL};

static const struct agent agents[] = {
    {"claude", claude_programs, NULL, 0, claude_env},
    {"codex", codex_programs, codex_files, ARRAY_SIZE(codex_files), codex_env},
    {"gemini", gemini_programs, gemini_files, ARRAY_SIZE(gemini_files),
     gemini_env},
    {"qwen", qwen_programs, qwen_files, ARRAY_SIZE(qwen_files), qwen_env},
    {"opencode", opencode_programs, opencode_files, ARRAY_SIZE(opencode_files),
     opencode_env},
};

static const struct agent *agent_of(const char *arg)
{
	static const char *const exts[] = {".js", ".mjs", ".cjs", ".exe"};
	const char *base = strrchr(arg, '/');
	size_t n;

	base = base ? base + 1 : arg;
	n = strlen(base);
	for (size_t i = 0; i < ARRAY_SIZE(exts); i++) {
		size_t e = strlen(exts[i]);

		if (n > e && strcmp(base + n - e, exts[i]) == 0) {
			n -= e;
			break;
		}
	}
	for (size_t i = 0; i < ARRAY_SIZE(agents); i++)
		for (const char *const *p = agents[i].programs; *p; p++)
			if (strlen(*p) == n && strncmp(base, *p, n) == 0)
				return &agents[i];
	return NULL;
}

static const struct agent *recognise(char *const *argv, size_t argc)
{
	for (size_t i = 0; i < argc && i < AGENTCONF_ARGV_SCAN && argv[i];
	     i++) {
		const struct agent *a = agent_of(argv[i]);

		if (a)
			return a;
	}
	return NULL;
}

const char *agentconf_recognise(char *const *argv, size_t argc)
{
	const struct agent *a = recognise(argv, argc);

	return a ? a->name : NULL;
}

/*
 * Create rel (a relative path of plain names) under the directory dirfd
 * with text, its directories made as needed (0700), nothing followed:
 * 1 when written, 0 when the file was there already (left alone), or
 * -errno.
 */
static int create_beneath(int dirfd, const char *rel, const char *text)
{
	char comp[256];
	const char *p = rel, *slash;
	int fd = dup(dirfd), nfd, r = 0;
	size_t len = strlen(text);

	if (fd < 0)
		return -errno;
	while ((slash = strchr(p, '/'))) {
		size_t n = (size_t)(slash - p);

		if (n == 0 || n >= sizeof(comp)) {
			r = -EINVAL;
			goto out;
		}
		memcpy(comp, p, n);
		comp[n] = '\0';
		if (mkdirat(fd, comp, 0700) < 0 && errno != EEXIST) {
			r = -errno;
			goto out;
		}
		/* A symbolic link here is refused (ELOOP), never followed. */
		nfd = openat(fd, comp,
			     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (nfd < 0) {
			r = -errno;
			goto out;
		}
		close(fd);
		fd = nfd;
		p = slash + 1;
	}
	/* O_EXCL: never an existing file, nor through a link. */
	nfd = openat(
	    fd, p, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (nfd < 0) {
		r = errno == EEXIST ? 0 : -errno;
		goto out;
	}
	for (size_t off = 0; off < len;) {
		ssize_t w = write(nfd, text + off, len - off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			r = w < 0 ? -errno : -EIO;
			break;
		}
		off += (size_t)w;
	}
	if (r == 0 && close(nfd) < 0)
		r = -errno;
	else if (r < 0) {
		close(nfd);
		/* A half-written file would be kept as the user's. */
		unlinkat(fd, p, 0);
	}
	if (r == 0)
		r = 1;
out:
	close(fd);
	return r;
}

const char *agentconf_prepare(const char *home, char *const *argv, size_t argc,
			      unsigned port, struct strv *env, int *ret_err)
{
	const struct agent *a = recognise(argv, argc);
	int dirfd;

	*ret_err = 0;
	if (!a)
		return NULL;
	for (const char *const *e = a->env; *e; e++)
		if (strv_push(env, *e) < 0) {
			*ret_err = -ENOMEM;
			return a->name;
		}
	if (!a->n_files)
		return a->name;
	dirfd = open(home, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dirfd < 0) {
		log_warn("agent %s: cannot open its home %s: %s", a->name, home,
			 strerror(errno));
		return a->name;
	}
	for (size_t i = 0; i < a->n_files; i++) {
		char text[AGENTCONF_FILE_MAX];
		int n, r;

		/* The formats are the table's own, %1$u the port only. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
		n = snprintf(text, sizeof(text), a->files[i].text, port);
#pragma GCC diagnostic pop
		if (n < 0 || (size_t)n >= sizeof(text))
			continue;
		r = create_beneath(dirfd, a->files[i].path, text);
		if (r < 0)
			log_warn("agent %s: cannot write ~/%s in its home "
				 "%s: %s",
				 a->name, a->files[i].path, home, strerror(-r));
	}
	close(dirfd);
	return a->name;
}
