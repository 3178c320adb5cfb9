/*
 * Attestations end to end (issue 40): session.verify signs what its
 * checks found about the branch's tip as a git note under refs/notes/spd
 * that git itself prints; attest.verify passes such a branch with spd's
 * key and fails it with another key only, with a byte flipped in the
 * note, with a commit on top, for an amended commit, for a failing
 * verdict; verifying a hostile repository runs none of its hooks,
 * filters or fsmonitor; a run can neither write the note nor read the
 * key.  A real spd and sandboxd, a real repository made with the git CLI.
 */
#include <jansson.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/paths.h"
#include "common/util.h"
#include "tests/lib/spdproc.h"
#include "tests/lib/testlib.h"

static struct test_spd T;
static char *REPO;

/* One check: passes once the agent made done.txt. */
#define PROJECT_CONF "[check \"unit\"]\n\trun = test -f done.txt\n"
/* A well-formed key that signed nothing here (32 zero bytes). */
#define OTHER_KEY "ed25519:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="

/* A verification's verdict, not one of its gates, passed. */
#define VERDICT_PASS "\"result\":{\"pass\":true"

static bool has(const char *hay, const char *needle)
{
	return hay && strstr(hay, needle) != NULL;
}

static void setup(void)
{
	char *files;

	test_spd_prepare(&T, NULL);
	test_spd_start(&T);
	REPO = paths_join(T.dir, "src/project");
	files = test_fmt("echo original > a.txt; printf '%%s' '%s' > .spd.conf",
			 PROJECT_CONF);
	test_make_repo(REPO, files);
	free(files);
}

static void teardown(void)
{
	free(REPO);
	REPO = NULL;
	test_spd_stop_clean(&T);
}

static char *rpcf(const char *token, const char *method, const char *f, ...)
    __attribute__((format(printf, 3, 4)));
static char *rpcf(const char *token, const char *method, const char *f, ...)
{
	va_list ap;
	char *params = NULL, *r;
	int fd;

	va_start(ap, f);
	ck_assert(vasprintf(&params, f, ap) >= 0);
	va_end(ap);
	fd = test_spd_connect(&T);
	r = test_rpc_on(&T, fd, token, method, params, 60000);
	close(fd);
	ck_assert_msg(r != NULL, "no response to %s", method);
	free(params);
	return r;
}

struct sess {
	char id[17], token[65];
};

static void start(const char *feature, struct sess *s)
{
	char *p =
	    test_fmt("{\"repo\":\"%s\",\"feature\":\"%s\"}", REPO, feature);

	test_session_start(&T, p, s->id, s->token);
	free(p);
}

/* The agent's run of a shell line in its session (the operator's token
 * with the session named, so that no person is asked); the reply. */
static char *run_sh(const struct sess *s, const char *line)
{
	json_t *argv = json_pack("[s, s, s]", "sh", "-c", line);
	char *a = json_dumps(argv, JSON_COMPACT), *r;

	r = rpcf(NULL, "cmd.run",
		 "{\"session\":\"%s\",\"yes\":true,\"argv\":%s}", s->id, a);
	free(a);
	json_decref(argv);
	return r;
}

static void run_ok(const struct sess *s, const char *line)
{
	char *r = run_sh(s, line);

	ck_assert_msg(has(r, "\"exit_code\":0"), "%s: %s", line, r);
	free(r);
}

/* git in a repository: its output (trailing newline cut). */
static char *git_in(const char *repo, const char *f, ...)
    __attribute__((format(printf, 2, 3)));
static char *git_in(const char *repo, const char *f, ...)
{
	va_list ap;
	char *args = NULL, *out = NULL;
	size_t n;

	va_start(ap, f);
	ck_assert(vasprintf(&args, f, ap) >= 0);
	va_end(ap);
	test_sh(&out, "git -C '%s' %s 2>&1", repo, args);
	free(args);
	if (!out)
		out = strdup("");
	n = strlen(out);
	while (n && out[n - 1] == '\n')
		out[--n] = '\0';
	return out;
}

/* attest.verify of branch in REPO against main, trust (a JSON array or
 * NULL for the default); the reply. */
static char *verify(const char *repo, const char *branch, const char *trust)
{
	return rpcf(NULL, "attest.verify",
		    "{\"repo\":\"%s\",\"branch\":\"%s\",\"base\":\"main\"%s%s}",
		    repo, branch, trust ? ",\"trust\":" : "",
		    trust ? trust : "");
}

/* A session whose agent committed done.txt and whose checks passed; its
 * branch's tip in ret_tip. */
static void passed_session(const char *feature, struct sess *s,
			   char ret_tip[41])
{
	char *r, *tip, *want;

	start(feature, s);
	run_ok(s, "echo d > done.txt && git add done.txt && "
		  "git commit -qm done");
	r = rpcf(NULL, "session.verify", "{\"id\":\"%s\"}", s->id);
	ck_assert_msg(has(r, VERDICT_PASS), "verify: %s", r);
	tip = git_in(REPO, "rev-parse spd/%s", feature);
	want = test_fmt("\"commit\":\"%s\"", tip);
	ck_assert_msg(has(r, want) &&
			  has(r, "\"notes_ref\":\"refs/notes/spd\""),
		      "the reply names the attested tip %s: %s", tip, r);
	snprintf(ret_tip, 41, "%s", tip);
	free(want);
	free(tip);
	free(r);
}

/*
 * Checks that pass: git itself prints the note, a DSSE envelope of an
 * in-toto statement; attest.verify passes the branch with spd's key,
 * attest.show says who signed and the verdict, and with another key only
 * the same branch fails.
 */
START_TEST(test_pass_note_and_verify)
{
	struct sess s = {0};
	char tip[41], *r, *note, *key;
	json_t *j;

	passed_session("feat", &s, tip);
	note = git_in(REPO, "notes --ref=spd show %s", tip);
	ck_assert_msg(
	    has(note, "\"payloadType\":\"application/vnd.in-toto+json\"") &&
		has(note, "\"signatures\":[{\"keyid\":\"SHA256:"),
	    "git notes --ref=spd show: %s", note);
	free(note);

	r = rpcf(NULL, "attest.key", "{}");
	j = json_loads(r, 0, NULL);
	key = strdup(json_string_value(
			 json_object_get(json_object_get(j, "result"), "key"))
			 ?: "");
	json_decref(j);
	ck_assert_msg(strncmp(key, "ed25519:", 8) == 0, "attest.key: %s", r);
	free(r);

	r = verify(REPO, "spd/feat", NULL);
	ck_assert_msg(has(r, "\"ok\":true") && has(r, key), "verify: %s", r);
	free(r);
	r = rpcf(NULL, "attest.show",
		 "{\"repo\":\"%s\",\"commit\":\"spd/feat\"}", REPO);
	ck_assert_msg(
	    has(r, "\"valid\":true") && has(r, "\"verdict\":\"pass\"") &&
		has(r, key) &&
		has(r, "https://spd.dev/attestation/session-verify/v1") &&
		has(r, "\"argv\":[\"test\",\"-f\",\"done.txt\"]") &&
		/* test -f prints nothing: the digest of no bytes. */
		has(r, "\"stdout\":{\"bytes\":0,\"dropped\":0,\"sha256\":"
		       "\"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca49"
		       "5991b7852b855\"") &&
		has(r, "\"secret_scan\":{\"result\":\"clean\"") &&
		has(r, "\"required\":[]") && has(r, "\"spd_conf_sha256\":\""),
	    "show: %s", r);
	free(r);

	/* Trusting another key only: the same note proves nothing. */
	r = verify(REPO, "spd/feat", "[\"" OTHER_KEY "\"]");
	ck_assert_msg(has(r, "\"ok\":false") &&
			  has(r, "no signature by a trusted key"),
		      "other key: %s", r);
	free(r);
	/* spctl's exit codes: 0 on a pass, 1 with the reason on a fail. */
	{
		char *args[] = {"attest", "verify",   "--repo",
				REPO,	  "--branch", "spd/feat",
				"--base", "main",     NULL};
		char *args2[] = {"attest",   "verify",	 "--repo", REPO,
				 "--branch", "spd/feat", "--base", "main",
				 "--trust",  OTHER_KEY,	 NULL};
		char *out = NULL;
		int st = test_spctl(&T, args, NULL, &out, NULL);

		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
			      "spctl attest verify: %s", out);
		free(out);
		out = NULL;
		st = test_spctl(&T, args2, NULL, &out, NULL);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 1 &&
				  has(out, "FAIL"),
			      "spctl attest verify --trust other: %s", out);
		free(out);
	}
	/* spctl attest show, for a person: the verdict and the signer. */
	{
		char *args[] = {"attest", "show", "spd/feat",
				"--repo", REPO,	  NULL};
		char *out = NULL;
		int st = test_spctl(&T, args, NULL, &out, NULL);

		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0 &&
				  has(out, "verdict:    pass") &&
				  has(out, key) && has(out, tip) &&
				  has(out, "check unit: exit 0"),
			      "spctl attest show: %s", out);
		free(out);
	}
	free(key);
}
END_TEST

/* session.merge signs its checks on a fresh checkout of the branch's
 * tip; after a fast-forward, main's tip is that commit and passes. */
START_TEST(test_merge_signs_branch_tip)
{
	struct sess s = {0};
	char *r, *tip, *want;

	start("mrg", &s);
	run_ok(&s, "echo d > done.txt && git add done.txt && "
		   "git commit -qm done");
	tip = git_in(REPO, "rev-parse spd/mrg");
	r = rpcf(NULL, "session.merge", "{\"id\":\"%s\"}", s.id);
	want = test_fmt("\"attestation\":{\"commit\":\"%s\"", tip);
	ck_assert_msg(has(r, "\"fast_forward\":true") && has(r, want),
		      "merge: %s", r);
	free(r);
	r = rpcf(NULL, "attest.show", "{\"repo\":\"%s\",\"commit\":\"main\"}",
		 REPO);
	ck_assert_msg(has(r, "\"checked\":\"branch-tip\"") &&
			  has(r, "\"method\":\"session.merge\"") &&
			  has(r, "\"valid\":true"),
		      "show: %s", r);
	free(r);
	r = rpcf(NULL, "attest.verify", "{\"repo\":\"%s\",\"branch\":\"main\"}",
		 REPO);
	ck_assert_msg(has(r, "\"ok\":true"), "verify main: %s", r);
	free(r);
	free(want);
	free(tip);
}
END_TEST

/* One byte of the envelope's payload changed: the signature no longer
 * holds, the branch fails. */
START_TEST(test_flipped_byte_fails)
{
	struct sess s = {0};
	char tip[41], *r;

	passed_session("flip", &s, tip);
	ck_assert_int_eq(
	    test_sh(NULL,
		    "cd '%s' && git notes --ref=spd show %s | "
		    "sed 's/\"payload\":\"eyJ/\"payload\":\"eyK/' > ../n && "
		    "grep -q eyK ../n && "
		    "git notes --ref=spd add -f -F ../n %s",
		    REPO, tip, tip),
	    0);
	r = verify(REPO, "spd/flip", NULL);
	ck_assert_msg(has(r, "\"ok\":false") && has(r, "\"attested\":false"),
		      "flipped: %s", r);
	free(r);
}
END_TEST

/* A commit after the verification is unattested, and so is an amended
 * commit (another tree, the same message), even with the note copied
 * onto it (made last: a branch made in the operator's repository ends
 * the session's attempt). */
START_TEST(test_later_and_amended_commits_fail)
{
	struct sess s = {0};
	char tip[41], *r, *amended;

	passed_session("later", &s, tip);
	/* The agent commits again after the verification. */
	run_ok(&s, "echo more > more.txt && git add more.txt && "
		   "git commit -qm more");
	r = verify(REPO, "spd/later", NULL);
	ck_assert_msg(has(r, "\"ok\":false") &&
			  has(r,
			      "is not attested: 1 commit(s) after the newest "
			      "attested one"),
		      "later commit: %s", r);
	free(r);
	/* An amend: the same parent and message, another tree. */
	amended = git_in(REPO,
			 "commit-tree $(git -C '%s' rev-parse main^{tree}) "
			 "-p %s^ -m done",
			 REPO, tip);
	ck_assert_int_eq(strlen(amended), 40);
	ck_assert_int_eq(
	    test_sh(NULL, "git -C '%s' branch amended %s", REPO, amended), 0);
	r = verify(REPO, "amended", NULL);
	ck_assert_msg(has(r, "\"ok\":false") && has(r, "no attestation"),
		      "amended: %s", r);
	free(r);
	ck_assert_int_eq(test_sh(NULL, "git -C '%s' notes --ref=spd copy %s %s",
				 REPO, tip, amended),
			 0);
	r = verify(REPO, "amended", NULL);
	ck_assert_msg(has(r, "\"ok\":false") &&
			  has(r, "the attestation is about another commit"),
		      "amended, note copied: %s", r);
	free(r);
	free(amended);
}
END_TEST

/* Checks that passed in a worktree holding uncommitted files: the
 * statement says how many, and it is no evidence about the commit. */
START_TEST(test_uncommitted_worktree_is_no_evidence)
{
	struct sess s = {0};
	char *r;

	start("dirty", &s);
	run_ok(&s, "echo x > x.txt && git add x.txt && git commit -qm x && "
		   "echo d > done.txt");
	r = rpcf(NULL, "session.verify", "{\"id\":\"%s\"}", s.id);
	ck_assert_msg(has(r, VERDICT_PASS), "verify: %s", r);
	free(r);
	r = rpcf(NULL, "attest.show",
		 "{\"repo\":\"%s\",\"commit\":\"spd/dirty\"}", REPO);
	ck_assert_msg(has(r, "\"worktree_uncommitted\":1") &&
			  has(r, "\"valid\":false"),
		      "show: %s", r);
	free(r);
	r = verify(REPO, "spd/dirty", NULL);
	ck_assert_msg(has(r, "\"ok\":false") && has(r, "files not committed"),
		      "verify: %s", r);
	free(r);
}
END_TEST

/* A verdict of fail is signed too, and fails the branch. */
START_TEST(test_failing_verdict_fails)
{
	struct sess s = {0};
	char *r;

	start("failing", &s);
	run_ok(&s, "echo x > x.txt && git add x.txt && git commit -qm x");
	r = rpcf(NULL, "session.verify", "{\"id\":\"%s\"}", s.id);
	ck_assert_msg(has(r, "\"pass\":false") && has(r, "\"notes_ref\""),
		      "verify: %s", r);
	free(r);
	r = verify(REPO, "spd/failing", NULL);
	ck_assert_msg(has(r, "\"ok\":false") &&
			  has(r, "the attested verdict is not a pass") &&
			  has(r, "\"verdict\":\"fail\""),
		      "failing: %s", r);
	free(r);
}
END_TEST

/*
 * In place, the note goes into the operator's own .git, which the guard
 * watches: spd's note is no finding (the guard watches branches and tags,
 * not notes), and the session goes on.  Checks that passed on files not
 * committed are no evidence about the commit.
 */
START_TEST(test_in_place_note_is_no_finding)
{
	struct sess s = {0};
	char *p = test_fmt("{\"repo\":\"%s\",\"feature\":\"ip\","
			   "\"in_place\":true}",
			   REPO);
	char *r, *tip;

	test_session_start(&T, p, s.id, s.token);
	free(p);
	run_ok(&s, "echo d > done.txt");
	r = rpcf(NULL, "session.verify", "{\"id\":\"%s\"}", s.id);
	tip = git_in(REPO, "rev-parse main");
	ck_assert_msg(has(r, VERDICT_PASS) && has(r, tip), "verify: %s", r);
	free(r);
	r = git_in(REPO, "notes --ref=spd show main");
	ck_assert_msg(has(r, "payloadType"), "the note: %s", r);
	free(r);
	/* The checks passed with done.txt, which main lacks: no evidence
	 * about main. */
	r = rpcf(NULL, "attest.verify", "{\"repo\":\"%s\",\"branch\":\"main\"}",
		 REPO);
	ck_assert_msg(has(r, "\"ok\":false") && has(r, "files not committed"),
		      "verify main: %s", r);
	free(r);
	run_ok(&s, "echo again > again.txt");
	r = rpcf(NULL, "session.status", "{\"id\":\"%s\"}", s.id);
	ck_assert_msg(has(r, "\"state\":\"active\""), "status: %s", r);
	free(r);
	free(tip);
}
END_TEST

/*
 * A hostile repository: a post-checkout hook, core.hooksPath, a smudge
 * filter for every file, core.fsmonitor and an [include] of a file
 * outside that sets more of them.  attest.verify and attest.show run none
 * of them (no marker appears) and open neither the config nor the file
 * it includes.  The controls: git opens them, and its checkout there
 * runs the traps.
 */
START_TEST(test_hostile_repository_runs_nothing)
{
	char *h = paths_join(T.dir, "hostile"), *m = paths_join(T.dir, "mark");
	char *r, *cfg, *inc, evbuf[4096];
	int ino;

	ck_assert_int_eq(mkdir(m, 0700), 0);
	test_make_repo(h, "echo one > f.txt");
	ck_assert_int_eq(
	    test_sh(
		NULL,
		"cd '%1$s' && "
		"echo '* filter=x' > .gitattributes && git add -A && "
		"git commit -qm attrs && git checkout -qb topic && "
		"echo two > g.txt && git add g.txt && git commit -qm two && "
		"git checkout -q main && "
		"printf '#!/bin/sh\\ntouch %2$s/$1\\n' > ../touch.sh && "
		"chmod +x ../touch.sh && "
		"mkdir -p ../hooks && "
		"printf '#!/bin/sh\\ntouch %2$s/hookspath\\n' > "
		"../hooks/post-checkout && chmod +x ../hooks/post-checkout && "
		"printf '#!/bin/sh\\ntouch %2$s/hook\\n' > "
		".git/hooks/post-checkout && "
		"chmod +x .git/hooks/post-checkout && "
		"git config filter.x.smudge '%1$s/../touch.sh smudge; cat' && "
		"git config filter.x.clean '%1$s/../touch.sh clean; cat' && "
		"git config core.fsmonitor '%1$s/../touch.sh fsmonitor' && "
		"git config core.hooksPath '%1$s/../hooks' && "
		"printf '[core]\\n\\tsshCommand = %1$s/../touch.sh ssh\\n' > "
		"../inc.cfg && git config include.path '%1$s/../inc.cfg' && "
		"test -z \"$(ls -A '%2$s')\"",
		h, m),
	    0);
	/* Not even read: the repository's config and what it includes
	 * (inotify sees every open of them). */
	ino = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	ck_assert_int_ge(ino, 0);
	cfg = test_fmt("%s/.git/config", h);
	inc = test_fmt("%s/../inc.cfg", h);
	ck_assert_int_ge(inotify_add_watch(ino, cfg, IN_OPEN), 0);
	ck_assert_int_ge(inotify_add_watch(ino, inc, IN_OPEN), 0);
	r = verify(h, "topic", NULL);
	ck_assert_msg(has(r, "\"ok\":false") && has(r, "no attestation"),
		      "hostile: %s", r);
	free(r);
	r = rpcf(NULL, "attest.show", "{\"repo\":\"%s\",\"commit\":\"topic\"}",
		 h);
	ck_assert_msg(has(r, "has no attestation"), "show: %s", r);
	free(r);
	ck_assert_int_eq(test_sh(NULL, "test -z \"$(ls -A '%s')\"", m), 0);
	ck_assert_msg(read(ino, evbuf, sizeof(evbuf)) < 0,
		      "spd opened the hostile repository's config or its "
		      "include");
	/* The controls: git reads both, and its checkout runs the filter
	 * and a hook. */
	test_sh(NULL, "git -C '%s' config -l", h);
	ck_assert_msg(read(ino, evbuf, sizeof(evbuf)) > 0,
		      "inotify saw no open of the config");
	close(ino);
	test_sh(NULL, "git -C '%s' checkout -q topic", h);
	ck_assert_msg(test_sh(NULL, "test -n \"$(ls -A '%s')\"", m) == 0,
		      "the hostile repository's traps do not fire at all");
	free(cfg);
	free(inc);
	free(h);
	free(m);
}
END_TEST

/*
 * A run can write neither the note nor refs/notes/spd in the operator's
 * repository (its git dir is read-only in runs; the policy denies `git
 * notes add`), nor read the signing key: the note is as spd wrote it.
 */
START_TEST(test_run_cannot_forge)
{
	struct sess s = {0};
	char tip[41], *before, *after, *r, *line, *key;

	passed_session("forge", &s, tip);
	before = git_in(REPO, "rev-parse refs/notes/spd");
	r = rpcf(NULL, "cmd.run",
		 "{\"session\":\"%s\",\"yes\":true,\"argv\":[\"git\","
		 "\"notes\",\"--ref=spd\",\"add\",\"-f\",\"-m\",\"forged\","
		 "\"%s\"]}",
		 s.id, tip);
	ck_assert_msg(has(r, "POLICY-DENIED") && has(r, "git.notes"),
		      "git notes add: %s", r);
	free(r);
	/* Around the policy: the ref written as a file, and by git. */
	line = test_fmt("mkdir -p '%1$s/.git/refs/notes' && "
			"echo %2$s > '%1$s/.git/refs/notes/spd'",
			REPO, tip);
	r = run_sh(&s, line);
	ck_assert_msg(!has(r, "\"exit_code\":0"), "%s: %s", line, r);
	free(r);
	free(line);
	line = test_fmt("git --git-dir='%s/.git' update-ref refs/notes/spd %s",
			REPO, tip);
	r = run_sh(&s, line);
	ck_assert_msg(!has(r, "\"exit_code\":0"), "%s: %s", line, r);
	free(r);
	/* The control: the same write outside the sandbox works (on a ref
	 * of its own). */
	ck_assert_int_eq(test_sh(NULL,
				 "git --git-dir='%s/.git' update-ref "
				 "refs/notes/control %s",
				 REPO, tip),
			 0);
	free(line);
	after = git_in(REPO, "rev-parse refs/notes/spd");
	ck_assert_str_eq(before, after);
	r = verify(REPO, "spd/forge", NULL);
	ck_assert_msg(has(r, "\"ok\":true"), "after the attempts: %s", r);
	free(r);
	/* The key is in the state dir, which no run sees. */
	key = paths_join(T.state, "attest.key");
	ck_assert_int_eq(access(key, F_OK), 0);
	line = test_fmt("cat '%s'", key);
	r = run_sh(&s, line);
	ck_assert_msg(!has(r, "\"exit_code\":0"), "cat the key: %s", r);
	free(r);
	free(line);
	free(key);
	free(before);
	free(after);
}
END_TEST

/* spd's public key, as attest.key answers. */
static char *spd_key(void)
{
	char *r = rpcf(NULL, "attest.key", "{}"), *key;
	json_t *j = json_loads(r, 0, NULL);

	key = strdup(json_string_value(
			 json_object_get(json_object_get(j, "result"), "key"))
			 ?: "");
	json_decref(j);
	free(r);
	ck_assert_msg(strncmp(key, "ed25519:", 8) == 0, "attest.key: %s", key);
	return key;
}

/*
 * --trust-from REF:PATH takes the keys of the file in that commit: the
 * branch's own copy of the file (which names spd's key) is ignored while
 * main's names another key only, and the branch's commit is refused as
 * the source; once main's copy names spd's key, the same branch passes.
 */
START_TEST(test_trust_from_base_not_head)
{
	struct sess s = {0};
	char *r, *key = spd_key(), *line;

	ck_assert_int_eq(
	    test_sh(NULL,
		    "cd '%s' && mkdir -p .spd && "
		    "echo '# CI signers' > .spd/allowed-signers && "
		    "echo '%s other' >> .spd/allowed-signers && "
		    "git add .spd && git commit -qm signers",
		    REPO, OTHER_KEY),
	    0);
	start("tf", &s);
	line =
	    test_fmt("echo '%s' > .spd/allowed-signers && echo d > done.txt && "
		     "git add -A && git commit -qm 'trust me'",
		     key);
	run_ok(&s, line);
	free(line);
	r = rpcf(NULL, "session.verify", "{\"id\":\"%s\"}", s.id);
	ck_assert_msg(has(r, VERDICT_PASS) && has(r, "\"notes_ref\""),
		      "verify: %s", r);
	free(r);
	/* The head's copy names spd's key; main's does not. */
	r = git_in(REPO, "show spd/tf:.spd/allowed-signers");
	ck_assert_msg(has(r, key), "the head's copy: %s", r);
	free(r);
	r = rpcf(NULL, "attest.verify",
		 "{\"repo\":\"%s\",\"branch\":\"spd/tf\",\"base\":\"main\","
		 "\"trust_from\":\"main:.spd/allowed-signers\"}",
		 REPO);
	ck_assert_msg(has(r, "\"ok\":false") &&
			  has(r, "no signature by a trusted key") &&
			  has(r, "\"path\":\".spd/allowed-signers\"") &&
			  has(r, "\"keys\":1"),
		      "main's signers: %s", r);
	free(r);
	/* The branch's own commit is no source of trust. */
	r = rpcf(NULL, "attest.verify",
		 "{\"repo\":\"%s\",\"branch\":\"spd/tf\",\"base\":\"main\","
		 "\"trust_from\":\"spd/tf:.spd/allowed-signers\"}",
		 REPO);
	ck_assert_msg(has(r, "\"error\"") && has(r, "did not write"),
		      "the head's signers: %s", r);
	free(r);
	/* main's copy names spd's key (the operator commits it): the same
	 * branch passes, by spctl too. */
	ck_assert_int_eq(
	    test_sh(NULL,
		    "cd '%s' && echo '%s' >> .spd/allowed-signers && "
		    "git commit -qam 'trust spd'",
		    REPO, key),
	    0);
	r = rpcf(NULL, "attest.verify",
		 "{\"repo\":\"%s\",\"branch\":\"spd/tf\",\"base\":\"main\","
		 "\"trust_from\":\"main:.spd/allowed-signers\"}",
		 REPO);
	ck_assert_msg(has(r, "\"ok\":true") && has(r, "\"keys\":2"),
		      "main's signers with spd's key: %s", r);
	free(r);
	{
		char *args[] = {"attest",
				"verify",
				"--repo",
				REPO,
				"--branch",
				"spd/tf",
				"--base",
				"main",
				"--trust-from",
				"main:.spd/allowed-signers",
				NULL};
		char *out = NULL;
		int st = test_spctl(&T, args, NULL, &out, NULL);

		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0 &&
				  has(out, "spd/tf: attested"),
			      "spctl --trust-from: %s", out);
		free(out);
	}
	free(key);
}
END_TEST

/*
 * attest show --trust-from REF:PATH: the note is valid only when the
 * file in REF names its signer, and the commit shown (or one that holds
 * it) is no source of trust.
 */
START_TEST(test_show_trust_from)
{
	struct sess s = {0};
	char tip[41], *r, *key = spd_key();

	ck_assert_int_eq(test_sh(NULL,
				 "cd '%s' && mkdir -p .spd && "
				 "echo '%s other' > .spd/allowed-signers && "
				 "git add .spd && git commit -qm signers",
				 REPO, OTHER_KEY),
			 0);
	passed_session("shw", &s, tip);
	r = rpcf(NULL, "attest.show",
		 "{\"repo\":\"%s\",\"commit\":\"spd/shw\","
		 "\"trust_from\":\"main:.spd/allowed-signers\"}",
		 REPO);
	ck_assert_msg(has(r, "\"valid\":false") &&
			  has(r, "no signature by a trusted key") &&
			  has(r, "\"keys\":1"),
		      "main's signers without spd's key: %s", r);
	free(r);
	r = rpcf(NULL, "attest.show",
		 "{\"repo\":\"%s\",\"commit\":\"spd/shw\","
		 "\"trust_from\":\"spd/shw:.spd/allowed-signers\"}",
		 REPO);
	ck_assert_msg(has(r, "\"error\"") && has(r, "did not write"),
		      "the shown commit's own signers: %s", r);
	free(r);
	ck_assert_int_eq(
	    test_sh(NULL,
		    "cd '%s' && echo '%s' >> .spd/allowed-signers && "
		    "git commit -qam 'trust spd'",
		    REPO, key),
	    0);
	r = rpcf(NULL, "attest.show",
		 "{\"repo\":\"%s\",\"commit\":\"spd/shw\","
		 "\"trust_from\":\"main:.spd/allowed-signers\"}",
		 REPO);
	ck_assert_msg(has(r, "\"valid\":true") && has(r, "\"keys\":2") &&
			  has(r, key),
		      "main's signers with spd's key: %s", r);
	free(r);
	{
		char *args[] = {"attest",
				"show",
				"spd/shw",
				"--repo",
				REPO,
				"--trust-from",
				"main:.spd/allowed-signers",
				NULL};
		char *out = NULL;
		int st = test_spctl(&T, args, NULL, &out, NULL);

		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0 &&
				  has(out, "signed by:  ") && has(out, key) &&
				  has(out, "trust from: 2 keys of "
					   ".spd/allowed-signers") &&
				  has(out, "model calls: 0"),
			      "spctl attest show --trust-from: %s", out);
		free(out);
	}
	free(key);
}
END_TEST

/*
 * session end with checks configured: the agent's uncommitted work is
 * committed onto the branch, the checks run on that tip and their pass
 * is signed there (by session.end), and the branch verifies.
 */
START_TEST(test_end_signs_checks)
{
	struct sess s = {0};
	char *r, *tip, *want;

	start("endok", &s);
	run_ok(&s, "echo d > done.txt");
	r = rpcf(NULL, "session.end", "{\"id\":\"%s\"}", s.id);
	tip = git_in(REPO, "rev-parse spd/endok");
	want = test_fmt("\"attestation\":{\"commit\":\"%s\"", tip);
	ck_assert_msg(has(r, "\"verified\":true") && has(r, want) &&
			  has(r, "\"committed\"") && has(r, "\"pass\":true"),
		      "end: %s", r);
	free(r);
	r = git_in(REPO, "show --stat --format= spd/endok");
	ck_assert_msg(has(r, "done.txt"), "the work on the tip: %s", r);
	free(r);
	r = rpcf(NULL, "attest.show",
		 "{\"repo\":\"%s\",\"commit\":\"spd/endok\"}", REPO);
	ck_assert_msg(has(r, "\"valid\":true") &&
			  has(r, "\"method\":\"session.end\"") &&
			  has(r, "\"checked\":\"branch-tip\"") &&
			  has(r, "\"session_rows\":{"),
		      "show: %s", r);
	free(r);
	r = verify(REPO, "spd/endok", NULL);
	ck_assert_msg(has(r, "\"ok\":true"), "verify: %s", r);
	free(r);
	free(want);
	free(tip);
}
END_TEST

/*
 * session end whose checks fail still ends (the work is kept on the
 * branch) but says UNVERIFIED and why, in the reply, in spctl's output
 * and in the journal; the failing verdict is what is signed, and the
 * branch does not verify.
 */
START_TEST(test_end_unverified_when_checks_fail)
{
	struct sess s = {0};
	char *r;

	start("endbad", &s);
	run_ok(&s, "echo x > other.txt && git add other.txt && "
		   "git commit -qm other");
	{
		char *args[] = {"session", "end", s.id, NULL};
		char *out = NULL, *err = NULL;
		int st = test_spctl(&T, args, NULL, &out, &err);

		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0 &&
				  has(err, "UNVERIFIED: the checks' verdict "
					   "is fail") &&
				  has(err, "exited 1"),
			      "spctl session end: %s / %s", out, err);
		free(out);
		free(err);
	}
	r = rpcf(NULL, "session.show", "{\"id\":\"%s\"}", s.id);
	ck_assert_msg(has(r, "\"state\":\"ended\""), "show: %s", r);
	free(r);
	r = rpcf(NULL, "journal.query",
		 "{\"session\":\"%s\",\"kind\":\"session.end-unverified\"}",
		 s.id);
	ck_assert_msg(has(r, "\"kind\":\"session.end-unverified\"") &&
			  has(r, "exited 1"),
		      "journal: %s", r);
	free(r);
	r = verify(REPO, "spd/endbad", NULL);
	ck_assert_msg(has(r, "\"ok\":false") &&
			  has(r, "the attested verdict is not a pass"),
		      "verify: %s", r);
	free(r);
}
END_TEST

/*
 * What must have passed comes from the merge base's .spd.conf, never the
 * branch's: a branch whose base required a check (or a command) that its
 * session did not run fails, though its own verdict was a pass.
 */
START_TEST(test_trusted_configuration_requires)
{
	struct sess s = {0};
	char *r;

	/* Two older commits of main required more; main's tip does not. */
	ck_assert_int_eq(
	    test_sh(
		NULL,
		"cd '%s' && cp .spd.conf ../conf.orig && "
		"printf '[check \"lint\"]\\n\\trun = true\\n' >> .spd.conf "
		"&& git commit -qam 'lint' && git tag strict-check && "
		"cp ../conf.orig .spd.conf && "
		"printf '[verify]\\n\\trequire = make lint\\n' >> .spd.conf "
		"&& git commit -qam 'require' && git tag strict-req && "
		"cp ../conf.orig .spd.conf && git commit -qam 'relaxed'",
		REPO),
	    0);
	passed_session("req", &s, (char[41]){0});
	r = verify(REPO, "spd/req", NULL);
	ck_assert_msg(has(r, "\"ok\":true") &&
			  has(r, "\"argv\":[\"test\",\"-f\",\"done.txt\"]"),
		      "against main: %s", r);
	free(r);
	r = rpcf(NULL, "attest.verify",
		 "{\"repo\":\"%s\",\"branch\":\"spd/req\","
		 "\"base\":\"strict-check\"}",
		 REPO);
	ck_assert_msg(has(r, "\"ok\":false") && has(r, "requires check") &&
			  has(r, "lint"),
		      "against strict-check: %s", r);
	free(r);
	r = rpcf(NULL, "attest.verify",
		 "{\"repo\":\"%s\",\"branch\":\"spd/req\","
		 "\"base\":\"strict-req\"}",
		 REPO);
	ck_assert_msg(has(r, "\"ok\":false") &&
			  has(r, "requires the command") && has(r, "make lint"),
		      "against strict-req: %s", r);
	free(r);
}
END_TEST

/* The lines of an strace -o log that are execve calls. */
static int execve_count(const char *log, char **ret_text)
{
	char *text = NULL;
	int n = 0;

	test_sh(&text, "grep -c 'execve(' '%s'", log);
	n = text ? atoi(text) : -1;
	free(text);
	test_sh(ret_text, "cat '%s'", log);
	return n;
}

/*
 * spctl attest verify without spd (--offline, or no spd listening): the
 * spd binary's verifier reads the repository itself, trusts spd's own
 * key from the state dir, and on a repository made hostile (hooks,
 * hooksPath, a smudge filter, fsmonitor, sshCommand, an include) runs
 * none of it: no marker, and strace sees no execve but spctl's and the
 * verifier's own.
 */
START_TEST(test_offline_verify_runs_nothing)
{
	struct sess s = {0};
	char *m = paths_join(T.dir, "mark"), *log = paths_join(T.dir, "strace");
	char *norun = test_fmt("SPD_RUNTIME_DIR=%s/norun", T.dir);
	char *spctl = test_prog("spctl"), *out = NULL, *trace = NULL;
	char *extra[] = {norun, NULL};
	int st;

	passed_session("off", &s, (char[41]){0});
	ck_assert_int_eq(mkdir(m, 0700), 0);
	ck_assert_int_eq(
	    test_sh(
		NULL,
		"cd '%1$s' && "
		"echo '* filter=x' > .gitattributes && "
		"printf '#!/bin/sh\\ntouch %2$s/$1\\n' > ../touch.sh && "
		"chmod +x ../touch.sh && mkdir -p ../hooks && "
		"for h in post-checkout pre-commit reference-transaction; do "
		"printf '#!/bin/sh\\ntouch %2$s/hookspath-'$h'\\n' > "
		"../hooks/$h; chmod +x ../hooks/$h; "
		"printf '#!/bin/sh\\ntouch %2$s/hook-'$h'\\n' > "
		".git/hooks/$h; chmod +x .git/hooks/$h; done && "
		"git config filter.x.smudge '%1$s/../touch.sh smudge; cat' && "
		"git config filter.x.clean '%1$s/../touch.sh clean; cat' && "
		"git config filter.x.process '%1$s/../touch.sh process' && "
		"git config diff.x.textconv '%1$s/../touch.sh textconv' && "
		"git config core.fsmonitor '%1$s/../touch.sh fsmonitor' && "
		"git config core.hooksPath '%1$s/../hooks' && "
		"printf '[core]\\n\\tsshCommand = %1$s/../touch.sh ssh\\n' > "
		"../inc.cfg && git config include.path '%1$s/../inc.cfg' && "
		"test -z \"$(ls -A '%2$s')\"",
		REPO, m),
	    0);
	{
		char *argv[] = {
		    "strace",	 "-f",	   "-qq", "-e",	      "trace=execve",
		    "-o",	 log,	   spctl, "attest",   "verify",
		    "--offline", "--repo", REPO,  "--branch", "spd/off",
		    "--base",	 "main",   NULL};

		if (access("/usr/bin/strace", X_OK) != 0) {
			printf("skipped: strace is not installed; the markers "
			       "are still checked\n");
			argv[0] = spctl;
			memmove(&argv[1], &argv[8], 10 * sizeof(char *));
		}
		/* LeakSanitizer cannot work under ptrace (make asan). */
		char *env[12] = {"ASAN_OPTIONS=detect_leaks=0"};

		for (size_t i = 0; T.env[i] && i + 2 < ARRAY_SIZE(env); i++)
			env[i + 1] = T.env[i];
		st = test_run(argv, env, &out, NULL);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0 &&
				  has(out, "spd/off: attested"),
			      "offline verify: %s", out);
		free(out);
		out = NULL;
		if (access("/usr/bin/strace", X_OK) == 0) {
			int n = execve_count(log, &trace);

			ck_assert_msg(n == 2 && has(trace, "spctl") &&
					  has(trace, "--attest-verify"),
				      "execve beyond spctl and the verifier: "
				      "%s",
				      trace);
			free(trace);
		}
	}
	/* No spd listening, no --offline: the same, by the verifier. */
	{
		char *args[] = {"attest",  "verify", "--repo", REPO, "--branch",
				"spd/off", "--base", "main",   NULL};

		st = test_spctl(&T, args, extra, &out, NULL);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0 &&
				  has(out, "spd/off: attested"),
			      "no spd: %s", out);
		free(out);
		out = NULL;
	}
	/* Another key only, offline: a fail, exit 1. */
	{
		char *args[] = {"attest",  "verify",   "--offline", "--repo",
				REPO,	   "--branch", "spd/off",   "--trust",
				OTHER_KEY, NULL};

		st = test_spctl(&T, args, NULL, &out, NULL);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 1 &&
				  has(out, "no signature by a trusted key"),
			      "offline, other key: %s", out);
		free(out);
		out = NULL;
	}
	ck_assert_int_eq(test_sh(NULL, "test -z \"$(ls -A '%s')\"", m), 0);
	/* The control: git's own checkout there runs the traps. */
	test_sh(NULL, "git -C '%s' checkout -q -f spd/off -- .", REPO);
	ck_assert_msg(test_sh(NULL, "test -n \"$(ls -A '%s')\"", m) == 0,
		      "the repository's traps do not fire at all");
	free(spctl);
	free(norun);
	free(log);
	free(m);
}
END_TEST

static Suite *attest_suite(void)
{
	Suite *s = suite_create("attest");
	TCase *tc = tcase_create("e2e");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_pass_note_and_verify);
	tcase_add_test(tc, test_merge_signs_branch_tip);
	tcase_add_test(tc, test_flipped_byte_fails);
	tcase_add_test(tc, test_later_and_amended_commits_fail);
	tcase_add_test(tc, test_failing_verdict_fails);
	tcase_add_test(tc, test_uncommitted_worktree_is_no_evidence);
	tcase_add_test(tc, test_in_place_note_is_no_finding);
	tcase_add_test(tc, test_hostile_repository_runs_nothing);
	tcase_add_test(tc, test_run_cannot_forge);
	tcase_add_test(tc, test_trust_from_base_not_head);
	tcase_add_test(tc, test_trusted_configuration_requires);
	tcase_add_test(tc, test_offline_verify_runs_nothing);
	suite_add_tcase(s, tc);
	tc = tcase_create("end");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_show_trust_from);
	tcase_add_test(tc, test_end_signs_checks);
	tcase_add_test(tc, test_end_unverified_when_checks_fail);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(attest_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
