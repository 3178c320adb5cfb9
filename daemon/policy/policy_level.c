/*
 * The policy's levels: one program, possibly wrapping another (env,
 * timeout, nice, xargs, interpreters), classified by kind (privilege,
 * shells, network tools, runners) and against the configured lists, and
 * the environment it is given.  Part of the policy engine
 * (policy_priv.h).
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "daemon/policy/protected.h"
#include "daemon/policy/policy.h"
#include "daemon/policy/policy_priv.h"

/* ---------------------------------------------------------------- */
/* Programs by kind                                                  */

static const char *const priv_cmds[] = {"sudo",	   "su", "doas",   "pkexec",
					"runuser", "sg", "newgrp", "calife"};
static const char *const shell_cmds[] = {
    "sh",   "bash",  "zsh",  "dash",   "ksh",	  "mksh",  "fish", "csh",
    "tcsh", "ash",   "yash", "rbash",  "busybox", "eval",  "exec", "source",
    ".",    "pdksh", "oksh", "elvish", "nu",	  "xonsh",
};
static const char *const net_cmds[] = {
    "curl",	  "wget",	 "nc",		"ncat",	    "netcat",
    "socat",	  "ssh",	 "scp",		"sftp",	    "rsync",
    "ftp",	  "telnet",	 "aria2c",	"http",	    "https",
    "lftp",	  "ssh-keyscan", "ssh-copy-id", "sshpass",  "mosh",
    "dig",	  "nslookup",	 "host",	"whois",    "ping",
    "traceroute", "tftp",	 "httpie",	"xh",	    "gh",
    "glab",	  "openssl",	 "gcloud",	"aws",	    "az",
    "kubectl",	  "docker",	 "podman",	"wormhole",
};
/* Programs that run their arguments as a command but that spd does not
 * peel: their inner command's place in argv depends on more than simple
 * options. */
static const char *const runner_cmds[] = {
    "chrt",	   "taskset",	   "flock",
    "watch",	   "strace",	   "ltrace",
    "gdb",	   "lldb",	   "valgrind",
    "parallel",	   "unbuffer",	   "script",
    "chroot",	   "unshare",	   "nsenter",
    "firejail",	   "systemd-run",  "at",
    "batch",	   "entr",	   "fakeroot",
    "proot",	   "bwrap",	   "nsjail",
    "builtin",	   "caffeinate",   "sandbox-exec",
    "expect",	   "setpriv",	   "numactl",
    "cpulimit",	   "trickle",	   "torsocks",
    "proxychains", "proxychains4", "faketime",
    "catchsegv",   "rlwrap",	   "dbus-run-session",
    "xvfb-run",	   "run-parts",	   "start-stop-daemon",
    "daemonize",   "cgexec",	   "prlimit",
};

struct interp {
	const char *name;
	const char *inline_short; /* short flags taking inline code */
	const char *const *inline_long;
};

static const struct interp interps[] = {
    {"python", "c", NULL},
    {"pypy", "c", NULL},
    {"perl", "eE", NULL},
    {"ruby", "e", NULL},
    {"irb", "", NULL},
    {"node", "ep", L("eval", "print")},
    {"nodejs", "ep", L("eval", "print")},
    {"bun", "e", L("eval", "print")},
    {"deno", "", L("eval")},
    {"php", "rB", NULL},
    {"lua", "e", NULL},
    {"luajit", "e", NULL},
    {"Rscript", "e", NULL},
    {"R", "e", NULL},
    {"tclsh", "", NULL},
    {"wish", "", NULL},
    {"pwsh", "c", L("command", "Command", "c")},
    {"osascript", "e", NULL},
    {"guile", "c", NULL},
    {"racket", "e", L("eval")},
    {"julia", "eE", L("eval", "print")},
    {"scala", "e", NULL},
    {"jshell", "", NULL},
    {"gawk-inline", "", NULL},
};

static const struct interp *find_interp(const char *name)
{
	char base[NAME_MAX + 1];
	size_t n = strlen(name);

	/* python3.11, perl5.36, pypy3: the version does not matter. */
	while (n > 0 &&
	       (isdigit((unsigned char)name[n - 1]) || name[n - 1] == '.'))
		n--;
	if (n == 0 || n > NAME_MAX)
		return NULL;
	memcpy(base, name, n);
	base[n] = '\0';
	for (size_t i = 0; i < ARRAY_SIZE(interps); i++)
		if (strcmp(interps[i].name, base) == 0)
			return &interps[i];
	return NULL;
}

static void run_interp(struct cls *c, struct lvl *l, const struct interp *ip)
{
	for (size_t i = 1; i < l->argc; i++) {
		const char *a = l->argv[i];

		if (a[0] != '-' || strcmp(a, "--") == 0)
			break;
		if (a[1] == '-' || (ip->inline_long && a[1] && a[2] &&
				    strcmp(ip->name, "pwsh") == 0)) {
			const char *name = a + (a[1] == '-' ? 2 : 1);
			size_t n = strcspn(name, "=");

			if (pol_long_in(ip->inline_long, name, n)) {
				pol_cmd_ask(c, "ask.interp.inline",
					    "%s %s runs inline code", l->name,
					    a);
				return;
			}
			continue;
		}
		for (const char *q = a + 1; *q; q++)
			if (strchr(ip->inline_short, *q)) {
				pol_cmd_ask(c, "ask.interp.inline",
					    "%s -%c runs inline code", l->name,
					    *q);
				return;
			}
	}
	if (strcmp(ip->name, "deno") == 0 && l->argc > 1 &&
	    strcmp(l->argv[1], "eval") == 0) {
		pol_cmd_ask(c, "ask.interp.inline",
			    "deno eval runs inline code");
		return;
	}
	pol_cmd_ask(c, "ask.interp", "%s runs a program spd cannot inspect",
		    l->name);
}

/* ---------------------------------------------------------------- */
/* Environment                                                       */

static const char *const env_deny[] = {
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_SSH",
    "GIT_SSH_COMMAND",
    "GIT_EXEC_PATH",
    "GIT_PROXY_COMMAND",
    "GIT_ASKPASS",
    "SSH_ASKPASS",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_TEMPLATE_DIR",
    "LD_PRELOAD",
    "LD_AUDIT",
    "DYLD_INSERT_LIBRARIES",
    "GIT_CEILING_DIRECTORIES",
    "GIT_DISCOVERY_ACROSS_FILESYSTEM",
};
static const char *const env_ask[] = {
    "GIT_PAGER",
    "PAGER",
    "GIT_EXTERNAL_DIFF",
    "GIT_EDITOR",
    "GIT_SEQUENCE_EDITOR",
    "EDITOR",
    "VISUAL",
    "LD_LIBRARY_PATH",
    "BASH_ENV",
    "ENV",
    "PYTHONPATH",
    "PYTHONSTARTUP",
    "PYTHONHOME",
    "PYTHONUSERBASE",
    "NODE_OPTIONS",
    "NODE_PATH",
    "PERL5OPT",
    "PERL5LIB",
    "PERLLIB",
    "RUBYOPT",
    "RUBYLIB",
    "LESSOPEN",
    "LESSCLOSE",
    "PROMPT_COMMAND",
    "SHELLOPTS",
    "BASHOPTS",
    "IFS",
    "PS4",
    "MANPAGER",
    "BROWSER",
    "DYLD_LIBRARY_PATH",
    "GCONV_PATH",
    "LOCPATH",
    "MALLOC_CONF",
    "GIT_TERMINAL_PROMPT",
    "ZDOTDIR",
    "CDPATH",
    "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS",
    "CLASSPATH",
    "GEM_PATH",
    "GEM_HOME",
    "HOME",
    "XDG_CONFIG_HOME",
};

void pol_check_env_name(struct cls *c, const char *name, size_t n)
{
	char buf[128];

	if (n >= sizeof(buf)) {
		pol_hard_ask(c, "ask.env",
			     "an environment variable with a very "
			     "long name");
		return;
	}
	memcpy(buf, name, n);
	buf[n] = '\0';
	if (IN(env_deny, buf) || strncmp(buf, "GIT_CONFIG", 10) == 0) {
		pol_deny(
		    c, "deny.env",
		    "%s changes which program, library or git repository is "
		    "used",
		    buf);
		return;
	}
	if (IN(env_ask, buf) || strncmp(buf, "GIT_TRACE", 9) == 0 ||
	    strncmp(buf, "LD_", 3) == 0 || strncmp(buf, "DYLD_", 5) == 0 ||
	    strncmp(buf, "BASH_FUNC_", 10) == 0)
		pol_hard_ask(c, "ask.env",
			     "%s makes the program run other code", buf);
}

/* ---------------------------------------------------------------- */
/* Levels: one program, possibly wrapping another                     */

/* Classify argv[start..] as the command a wrapper runs. */
static void peel(struct cls *c, struct lvl *l, size_t start, char *cwd,
		 const char *path_env)
{
	struct lvl in = {
	    .argv = l->argv + start,
	    .argc = l->argc - start,
	    .cwd = cwd ? cwd : l->cwd,
	    .path_env = path_env ? path_env : l->path_env,
	    .depth = l->depth + 1,
	};

	if (start >= l->argc)
		return;
	pol_classify_level(c, &in);
	free(in.exe);
}

/* Skip the options of a wrapper: shortv/longv as for walk_opts.  Returns
 * the index of the first operand. */
static size_t skip_wrapper_opts(const struct lvl *l, const char *shortv,
				const char *const *longv)
{
	size_t i = 1;

	while (i < l->argc) {
		const char *a = l->argv[i];

		if (strcmp(a, "--") == 0)
			return i + 1;
		if (a[0] != '-' || a[1] == '\0')
			return i;
		if (a[1] == '-') {
			const char *name = a + 2;
			size_t n = strcspn(name, "=");

			if (!name[n] && pol_long_kind(longv, name, n))
				i++;
			i++;
			continue;
		}
		bool takes = false;

		for (const char *q = a + 1; *q; q++)
			if (pol_short_kind(shortv, *q)) {
				takes = q[1] == '\0';
				break;
			}
		i += takes ? 2 : 1;
	}
	return i;
}

static void run_env(struct cls *c, struct lvl *l)
{
	size_t i = 1;
	char *cwd = NULL;
	const char *path_env = NULL;

	for (; i < l->argc; i++) {
		const char *a = l->argv[i];

		if (strcmp(a, "--") == 0) {
			i++;
			break;
		}
		if (a[0] == '-' && a[1]) {
			const char *dir = NULL;

			if (strcmp(a, "-S") == 0 || strncmp(a, "-S", 2) == 0 ||
			    strncmp(a, "--split-string", 14) == 0 ||
			    (a[1] != '-' && strchr(a, 'S'))) {
				pol_cmd_ask(
				    c, "ask.shell",
				    "env -S splits a string into a command "
				    "like a shell");
				goto out;
			}
			if (strcmp(a, "-u") == 0 || strcmp(a, "--unset") == 0) {
				i++;
				continue;
			}
			if (strcmp(a, "-C") == 0 || strcmp(a, "--chdir") == 0)
				dir = i + 1 < l->argc ? l->argv[++i] : NULL;
			else if (strncmp(a, "--chdir=", 8) == 0)
				dir = a + 8;
			else if (strncmp(a, "-C", 2) == 0)
				dir = a + 2;
			if (dir) {
				char *abs =
				    pol_absolutize(cwd ? cwd : l->cwd, dir);
				char *real = NULL;

				if (!abs ||
				    pol_resolve_abs(c, abs, &real) == -ENOMEM) {
					free(abs);
					c->err = -ENOMEM;
					goto out;
				}
				free(abs);
				if (!real || !pol_inside_ws(c, real)) {
					pol_deny(c, "deny.path.outside",
						 "env -C %s runs the command "
						 "outside "
						 "the workspace",
						 dir);
					free(real);
					goto out;
				}
				free(cwd);
				cwd = real;
			}
			continue;
		}
		const char *eq = strchr(a, '=');

		if (!eq)
			break;
		pol_check_env_name(c, a, (size_t)(eq - a));
		if (strncmp(a, "PATH=", 5) == 0)
			path_env = eq + 1;
	}
	if (i >= l->argc) {
		pol_allow(c, "allow.cmd", "env without a command only prints");
		goto out;
	}
	pol_cmd_ask(c, "ask.wrapper", "env runs its arguments as a command");
	peel(c, l, i, cwd, path_env);
out:
	free(cwd);
}

static void run_wrapper(struct cls *c, struct lvl *l)
{
	const char *n = l->name;
	size_t i;

	if (strcmp(n, "timeout") == 0) {
		i = skip_wrapper_opts(l, "sk", L("signal", "kill-after"));
		i++; /* the duration */
	} else if (strcmp(n, "nice") == 0) {
		i = skip_wrapper_opts(l, "n", L("adjustment"));
	} else if (strcmp(n, "nohup") == 0 || strcmp(n, "setsid") == 0) {
		i = skip_wrapper_opts(l, "", NULL);
	} else if (strcmp(n, "command") == 0) {
		i = skip_wrapper_opts(l, "", NULL);
		for (size_t k = 1; k < i && k < l->argc; k++)
			if (strchr(l->argv[k], 'v') ||
			    strchr(l->argv[k], 'V')) {
				pol_allow(c, "allow.cmd",
					  "command -v only looks "
					  "a name up");
				return;
			}
	} else if (strcmp(n, "stdbuf") == 0) {
		i = skip_wrapper_opts(l, "ioe", L("input", "output", "error"));
	} else if (strcmp(n, "ionice") == 0) {
		i = skip_wrapper_opts(
		    l, "cnpPu", L("class", "classdata", "pid", "pgid", "uid"));
	} else if (strcmp(n, "time") == 0) {
		for (i = 1; i < l->argc; i++) {
			const char *a = l->argv[i];

			if (strcmp(a, "-o") == 0 && i + 1 < l->argc)
				pol_check_path(c, l->cwd, l->argv[++i],
					       PM_WRITE, "time");
			else if (strncmp(a, "--output=", 9) == 0)
				pol_check_path(c, l->cwd, a + 9, PM_WRITE,
					       "time");
			else if (strcmp(a, "-f") == 0 ||
				 strcmp(a, "--format") == 0)
				i++;
			else if (strcmp(a, "--") == 0) {
				i++;
				break;
			} else if (a[0] != '-')
				break;
		}
	} else { /* xargs */
		for (i = 1; i < l->argc; i++) {
			const char *a = l->argv[i];

			if (strcmp(a, "-a") == 0 && i + 1 < l->argc)
				pol_check_path(c, l->cwd, l->argv[++i], PM_READ,
					       "xargs");
			else if (strncmp(a, "--arg-file=", 11) == 0)
				pol_check_path(c, l->cwd, a + 11, PM_READ,
					       "xargs");
			else if (strcmp(a, "-d") == 0 || strcmp(a, "-E") == 0 ||
				 strcmp(a, "-I") == 0 || strcmp(a, "-L") == 0 ||
				 strcmp(a, "-n") == 0 || strcmp(a, "-P") == 0 ||
				 strcmp(a, "-s") == 0)
				i++;
			else if (strcmp(a, "--") == 0) {
				i++;
				break;
			} else if (a[0] != '-')
				break;
		}
	}
	pol_cmd_ask(c, "ask.wrapper", "%s runs its arguments as a command", n);
	if (i < l->argc)
		peel(c, l, i, NULL, NULL);
}

static const char *const wrapper_cmds[] = {
    "timeout", "nice",	"nohup", "command", "stdbuf",
    "setsid",  "xargs", "time",	 "ionice",
};

/* Does entry match l (argv prefix, or exact)?  loose: for deny and ask,
 * a program also matches by the basename of argv[0] wherever it was
 * found; for allow only a program known by name (or by path) does. */
static bool entry_match(struct cls *c, const struct lvl *l,
			const struct entry *e, bool exact, bool loose)
{
	const char *w0 = e->words[0];

	if (e->n > l->argc || (exact && e->n != l->argc))
		return false;
	for (size_t k = 1; k < e->n; k++)
		if (strcmp(e->words[k], l->argv[k]) != 0)
			return false;
	if (strchr(w0, '/')) {
		char *abs = pol_absolutize(c->ws, w0), *real = NULL;
		bool ok;

		if (!abs || pol_resolve_abs(c, abs, &real) < 0) {
			free(abs);
			return false;
		}
		ok = l->exe && strcmp(real, l->exe) == 0;
		free(abs);
		free(real);
		return ok || (loose && strcmp(w0, l->argv[0]) == 0);
	}
	if (l->where == EXE_TRUSTED && strcmp(l->name, w0) == 0)
		return true;
	if (loose) {
		const char *b = strrchr(l->argv[0], '/');

		return strcmp(b ? b + 1 : l->argv[0], w0) == 0;
	}
	return false;
}

bool pol_list_match(struct cls *c, const struct lvl *l, enum policy_layer layer,
		    enum policy_list list, bool exact, bool loose)
{
	const struct elist *e;

	if (!c->conf)
		return false;
	e = &c->conf->lists[layer][list];
	for (size_t i = 0; i < e->n; i++)
		if (entry_match(c, l, &e->v[i], exact, loose))
			return true;
	return false;
}

/* Arguments of a program spd does not know: only what is certain is
 * refused (a secret-looking file named outright). */
static void scan_unknown_args(struct cls *c, const struct lvl *l)
{
	for (size_t i = 1; i < l->argc; i++) {
		const char *a = l->argv[i];
		const char *eq = a[0] == '-' ? strchr(a, '=') : NULL;
		const char *v = eq ? eq + 1 : a;

		if (*v && protected_match(v) == PROTECTED_SECRET_FILE)
			pol_deny(
			    c, "deny.secret.read",
			    "%s is given %s, which looks like a secret file",
			    l->argv[0], v);
	}
}

void pol_classify_level(struct cls *c, struct lvl *l)
{
	static const char *const layer_name[] = {"operator", "project"};
	const char *n;

	if (c->err || l->argc == 0)
		return;
	if (l->depth > POLICY_PEEL_MAX) {
		pol_cmd_ask(c, "ask.wrapper",
			    "more than %d wrappers inside each other",
			    POLICY_PEEL_MAX);
		return;
	}
	pol_ident(c, l);
	if (c->err)
		return;
	if (l->depth == 0 && l->exe && !(c->exe = strdup(l->exe))) {
		c->err = -ENOMEM;
		return;
	}
	for (int layer = 0; layer < 2; layer++) {
		if (pol_list_match(c, l, layer, POLICY_LIST_DENY, false, true))
			pol_deny(c,
				 layer ? "deny.conf.project"
				       : "deny.conf.operator",
				 "the %s's configuration denies %s",
				 layer_name[layer], l->argv[0]);
		if (pol_list_match(c, l, layer, POLICY_LIST_ASK, false, true))
			pol_hard_ask(
			    c, layer ? "ask.conf.project" : "ask.conf.operator",
			    "the %s's configuration asks before %s",
			    layer_name[layer], l->argv[0]);
	}
	/* Privilege escalation is refused by name wherever the program
	 * sits: no copy of sudo is an ordinary program. */
	{
		const char *b = strrchr(l->argv[0], '/');

		if (IN(priv_cmds, b ? b + 1 : l->argv[0])) {
			pol_deny(c, "deny.priv", "%s escalates privileges",
				 l->argv[0]);
			return;
		}
	}
	switch (l->where) {
	case EXE_NOTFOUND:
		scan_unknown_args(c, l);
		pol_cmd_ask(c, "ask.exe.notfound",
			    "%s is not an executable in PATH", l->argv[0]);
		return;
	case EXE_WORKSPACE:
		scan_unknown_args(c, l);
		pol_cmd_ask(
		    c, "ask.exe.workspace",
		    "%s is a program from the workspace, which the agent "
		    "can change",
		    l->argv[0]);
		return;
	case EXE_UNTRUSTED:
		scan_unknown_args(c, l);
		pol_cmd_ask(
		    c, "ask.exe.untrusted",
		    "%s is not in a system directory or the session's PATH",
		    l->argv[0]);
		return;
	case EXE_TRUSTED:
		break;
	}
	n = l->name;
	const struct spec *s = pol_find_spec(n);
	const struct interp *ip;

	if (s) {
		pol_run_simple(c, l, s);
	} else if (strcmp(n, "find") == 0) {
		pol_run_find(c, l);
	} else if (strcmp(n, "sed") == 0 || strcmp(n, "gsed") == 0) {
		pol_run_sed(c, l);
	} else if (strcmp(n, "awk") == 0 || strcmp(n, "gawk") == 0 ||
		   strcmp(n, "mawk") == 0 || strcmp(n, "nawk") == 0 ||
		   strcmp(n, "original-awk") == 0) {
		pol_run_awk(c, l);
	} else if (strcmp(n, "git") == 0) {
		pol_run_git(c, l);
	} else if (strcmp(n, "dd") == 0) {
		pol_run_dd(c, l);
	} else if (strcmp(n, "env") == 0) {
		run_env(c, l);
	} else if (IN(wrapper_cmds, n)) {
		run_wrapper(c, l);
	} else if (IN(priv_cmds, n)) {
		pol_deny(c, "deny.priv", "%s escalates privileges", n);
	} else if (IN(shell_cmds, n)) {
		pol_cmd_ask(c, "ask.shell",
			    "%s is a shell: it runs whatever its arguments say",
			    n);
	} else if (IN(net_cmds, n)) {
		scan_unknown_args(c, l);
		pol_cmd_ask(c, "ask.net.tool", "%s is a network tool", n);
	} else if (IN(runner_cmds, n)) {
		pol_cmd_ask(c, "ask.wrapper", "%s runs another program", n);
	} else if ((ip = find_interp(n))) {
		scan_unknown_args(c, l);
		run_interp(c, l, ip);
	} else {
		scan_unknown_args(c, l);
	}
}
