/*
 * The egress proxy's decisions without I/O (daemon/proxy/rules.c): host
 * names against [network] allow-host, deny-host and ask-host, and the
 * address classes a name must not lead to.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <check.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "daemon/proxy/proxy.h"
#include "daemon/config.h"
#include "daemon/spd.h"
#include "tests/lib/testlib.h"

static char *allow[] = {"registry.npmjs.org", "*.example.com", NULL};
static char *deny[] = {"bad.example.com", NULL};
static char *ask[] = {"github.com", "*.example.com", NULL};
static char *addrs[] = {"10.1.2.3", "fd00::1", NULL};

static struct spd_config conf(void)
{
	return (struct spd_config){.proxy_allow_host = allow,
				   .proxy_deny_host = deny,
				   .proxy_ask_host = ask,
				   .proxy_allow_address = addrs};
}

START_TEST(test_host_rules)
{
	struct spd_config c = conf();

	ck_assert_int_eq(proxy_decide(&c, "registry.npmjs.org"), PROXY_ALLOW);
	ck_assert_int_eq(proxy_decide(&c, "REGISTRY.npmjs.org."), PROXY_ALLOW);
	ck_assert_int_eq(proxy_decide(&c, "a.b.example.com"), PROXY_ALLOW);
	/* A wildcard covers names below, not the apex or a look-alike. */
	ck_assert_int_eq(proxy_decide(&c, "example.com"), PROXY_DENY_UNLISTED);
	ck_assert_int_eq(proxy_decide(&c, "badexample.com"),
			 PROXY_DENY_UNLISTED);
	/* deny-host wins over a wildcard allow. */
	ck_assert_int_eq(proxy_decide(&c, "Bad.Example.com"), PROXY_DENY_RULE);
	/* ask-host when not allowed; an allow-host wins over it. */
	ck_assert_int_eq(proxy_decide(&c, "github.com"), PROXY_ASK);
	ck_assert_int_eq(proxy_decide(&c, "x.example.com"), PROXY_ALLOW);
	ck_assert_int_eq(proxy_decide(&c, "api.github.com"),
			 PROXY_DENY_UNLISTED);
	ck_assert_int_eq(proxy_decide(&c, "npmjs.org"), PROXY_DENY_UNLISTED);
	ck_assert_int_eq(proxy_decide(&c, ""), PROXY_DENY_UNLISTED);
	/* Raw addresses only by allow-address. */
	ck_assert_int_eq(proxy_decide(&c, "93.184.216.34"), PROXY_DENY_ADDRESS);
	ck_assert_int_eq(proxy_decide(&c, "10.1.2.3"), PROXY_ALLOW);
	ck_assert_int_eq(proxy_decide(&c, "::1"), PROXY_DENY_ADDRESS);
}
END_TEST

static const char *class_of(const char *a)
{
	static struct sockaddr_storage ss;

	memset(&ss, 0, sizeof(ss));
	if (inet_pton(AF_INET, a, &((struct sockaddr_in *)&ss)->sin_addr) == 1)
		ss.ss_family = AF_INET;
	else {
		ck_assert_int_eq(
		    inet_pton(AF_INET6, a,
			      &((struct sockaddr_in6 *)&ss)->sin6_addr),
		    1);
		ss.ss_family = AF_INET6;
	}
	return proxy_address_class((struct sockaddr *)&ss) ?: "public";
}

START_TEST(test_address_classes)
{
	ck_assert_str_eq(class_of("127.0.0.1"), "loopback");
	ck_assert_str_eq(class_of("127.9.9.9"), "loopback");
	ck_assert_str_eq(class_of("169.254.169.254"), "link-local");
	ck_assert_str_eq(class_of("10.0.0.1"), "private");
	ck_assert_str_eq(class_of("172.16.0.1"), "private");
	ck_assert_str_eq(class_of("172.31.255.255"), "private");
	ck_assert_str_eq(class_of("172.32.0.1"), "public");
	ck_assert_str_eq(class_of("192.168.1.1"), "private");
	ck_assert_str_eq(class_of("100.64.0.1"), "shared");
	ck_assert_str_eq(class_of("100.128.0.1"), "public");
	ck_assert_str_eq(class_of("0.0.0.0"), "unspecified");
	ck_assert_str_eq(class_of("93.184.216.34"), "public");
	ck_assert_str_eq(class_of("::1"), "loopback");
	ck_assert_str_eq(class_of("::"), "unspecified");
	ck_assert_str_eq(class_of("fe80::1"), "link-local");
	ck_assert_str_eq(class_of("fd12::1"), "unique-local");
	ck_assert_str_eq(class_of("::ffff:127.0.0.1"), "loopback");
	ck_assert_str_eq(class_of("::ffff:169.254.169.254"), "link-local");
	ck_assert_str_eq(class_of("2606:4700::1"), "public");
}
END_TEST

/* Addresses that embed a v4 one reach it through a translator or a
 * tunnel: NAT64 (well-known and local-use prefixes), 6to4, Teredo, the
 * old v4-compatible form.  Site-local fec0::/10 is private. */
START_TEST(test_address_classes_embedded)
{
	ck_assert_str_eq(class_of("64:ff9b::127.0.0.1"), "loopback");
	ck_assert_str_eq(class_of("64:ff9b::169.254.169.254"), "link-local");
	ck_assert_str_eq(class_of("64:ff9b::a9fe:a9fe"), "link-local");
	ck_assert_str_eq(class_of("64:ff9b::10.0.0.1"), "private");
	ck_assert_str_eq(class_of("64:ff9b::192.168.0.1"), "private");
	ck_assert_str_eq(class_of("64:ff9b::93.184.216.34"), "public");
	/* Local-use NAT64: a /48 prefix puts the v4 address in bytes 6-7
	 * and 9-10, a /96 one at the end. */
	ck_assert_str_eq(class_of("64:ff9b:1:a9fe:a9:fe00::"), "link-local");
	ck_assert_str_eq(class_of("64:ff9b:1:7f00:0:100::"), "loopback");
	ck_assert_str_eq(class_of("64:ff9b:1:5db8:d8:2200:a00:1"), "private");
	ck_assert_str_eq(class_of("64:ff9b:1:5db8:d8:2200:5db8:d822"),
			 "public");
	/* 6to4. */
	ck_assert_str_eq(class_of("2002:a9fe:a9fe::1"), "link-local");
	ck_assert_str_eq(class_of("2002:7f00:1::"), "loopback");
	ck_assert_str_eq(class_of("2002:c0a8:101::1"), "private");
	ck_assert_str_eq(class_of("2002:5db8:d822::1"), "public");
	/* Teredo: server 10.0.0.1; client 127.0.0.1 stored flipped. */
	ck_assert_str_eq(class_of("2001:0:a00:1::"), "private");
	ck_assert_str_eq(class_of("2001:0:5db8:d822::80ff:fffe"), "loopback");
	ck_assert_str_eq(class_of("2001:0:5db8:d822::a247:2761"), "public");
	/* v4-compatible. */
	ck_assert_str_eq(class_of("::127.0.0.1"), "loopback");
	ck_assert_str_eq(class_of("::169.254.169.254"), "link-local");
	/* Site-local. */
	ck_assert_str_eq(class_of("fec0::1"), "site-local");
	ck_assert_str_eq(class_of("feff::1"), "site-local");
	ck_assert_str_eq(class_of("fe80::1"), "link-local");
}
END_TEST

START_TEST(test_allow_address)
{
	struct spd_config c = conf();
	struct sockaddr_in a = {.sin_family = AF_INET};

	inet_pton(AF_INET, "10.1.2.3", &a.sin_addr);
	ck_assert(proxy_address_ok(&c, (struct sockaddr *)&a));
	inet_pton(AF_INET, "10.1.2.4", &a.sin_addr);
	ck_assert(!proxy_address_ok(&c, (struct sockaddr *)&a));
	inet_pton(AF_INET, "8.8.8.8", &a.sin_addr);
	ck_assert(proxy_address_ok(&c, (struct sockaddr *)&a));
}
END_TEST

/* A project's rules only tighten spd.conf's: the stricter decision. */
START_TEST(test_project_tightens)
{
	struct spd_config c = conf();
	char *pallow[] = {"registry.npmjs.org", "github.com", "evil.org", NULL};
	char *pdeny[] = {"a.example.com", NULL};
	char *pask[] = {"b.example.com", NULL};
	struct proxy_project p = {.allow = pallow, .deny = pdeny, .ask = pask};
	char *none[] = {NULL};
	struct proxy_project empty = {.allow = none};

	ck_assert_int_eq(proxy_decide_run(&c, NULL, "x.example.com"),
			 PROXY_ALLOW);
	ck_assert_int_eq(proxy_decide_run(&c, &p, "registry.npmjs.org"),
			 PROXY_ALLOW);
	/* Narrowed out, denied, turned into an ask. */
	ck_assert_int_eq(proxy_decide_run(&c, &p, "x.example.com"),
			 PROXY_DENY_PROJECT_UNLISTED);
	ck_assert_int_eq(proxy_decide_run(&c, &p, "a.example.com"),
			 PROXY_DENY_PROJECT);
	ck_assert_int_eq(proxy_decide_run(&c, &p, "b.example.com"), PROXY_ASK);
	/* The project's allow cannot make spd.conf's ask an allow, nor
	 * reach a host spd.conf does not name. */
	ck_assert_int_eq(proxy_decide_run(&c, &p, "github.com"), PROXY_ASK);
	ck_assert_int_eq(proxy_decide_run(&c, &p, "evil.org"),
			 PROXY_DENY_UNLISTED);
	ck_assert(proxy_project_names(&p, "evil.org"));
	ck_assert_int_eq(proxy_decide_run(&c, &p, "bad.example.com"),
			 PROXY_DENY_RULE);
	/* An empty allow list leaves nothing. */
	ck_assert_int_eq(proxy_decide_run(&c, &empty, "registry.npmjs.org"),
			 PROXY_DENY_PROJECT_UNLISTED);
}
END_TEST

START_TEST(test_pattern_covered)
{
	char *l[] = {"registry.npmjs.org", "*.example.com", NULL};

	ck_assert(proxy_pattern_covered(l, "registry.npmjs.org"));
	ck_assert(proxy_pattern_covered(l, "Registry.NPMJS.org."));
	ck_assert(proxy_pattern_covered(l, "a.example.com"));
	ck_assert(proxy_pattern_covered(l, "*.a.example.com"));
	ck_assert(proxy_pattern_covered(l, "*.example.com"));
	ck_assert(!proxy_pattern_covered(l, "example.com"));
	ck_assert(!proxy_pattern_covered(l, "*.com"));
	ck_assert(!proxy_pattern_covered(l, "*.npmjs.org"));
	ck_assert(!proxy_pattern_covered(l, "evil.org"));
	ck_assert(!proxy_pattern_covered(NULL, "evil.org"));
}
END_TEST

/* The project's .spd.conf as proxy_project_load reads it. */
static struct proxy_project *load_project(const char *text)
{
	struct spd_config c = conf();
	struct proxy_project *p = NULL;
	char dir[] = "/tmp/spd-proxy-project-XXXXXX", path[64];
	FILE *f;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/.spd.conf", dir);
	if (text) {
		f = fopen(path, "w");
		ck_assert_ptr_nonnull(f);
		fputs(text, f);
		fclose(f);
	}
	ck_assert_int_eq(proxy_project_load(&c, dir, &p), 0);
	unlink(path);
	rmdir(dir);
	return p;
}

START_TEST(test_project_load)
{
	struct spd_config c = conf();
	struct proxy_project *p;

	ck_assert_ptr_null(load_project(NULL));
	ck_assert_ptr_null(load_project("[policy]\n\tallow = make\n"));
	p = load_project(
	    "[network]\n\tallow-host = a.example.com\n"
	    "\tallow-host = evil.org\n\task-host = *.npmjs.org\n"
	    "\tdeny-host = b.example.com\n"
	    "\tallow-address = 127.0.0.1\n\tresolve = x.test:1.2.3.4\n");
	ck_assert_ptr_nonnull(p);
	ck_assert_ptr_null(p->error);
	ck_assert_str_eq(p->allow[0], "a.example.com");
	ck_assert_str_eq(p->allow[1], "evil.org");
	ck_assert_str_eq(p->deny[0], "b.example.com");
	/* Set aside: what spd.conf does not cover, and the operator's
	 * keys. */
	ck_assert_ptr_nonnull(p->ignored);
	ck_assert(strstr(p->ignored[0], "allow-host = evil.org"));
	ck_assert(strstr(p->ignored[1], "ask-host = *.npmjs.org"));
	ck_assert(strstr(p->ignored[2], "allow-address = 127.0.0.1"));
	ck_assert(strstr(p->ignored[3], "resolve = x.test:1.2.3.4"));
	ck_assert_ptr_null(p->ignored[4]);
	ck_assert_int_eq(proxy_decide_run(&c, p, "a.example.com"), PROXY_ALLOW);
	ck_assert_int_eq(proxy_decide_run(&c, p, "c.example.com"),
			 PROXY_DENY_PROJECT_UNLISTED);
	proxy_project_free(p);
	/* A file that includes another refuses every host. */
	p = load_project("[include]\n\tpath = /etc/other\n"
			 "[network]\n\tallow-host = a.example.com\n");
	ck_assert_ptr_nonnull(p);
	ck_assert_ptr_nonnull(p->error);
	ck_assert_int_eq(proxy_decide_run(&c, p, "a.example.com"),
			 PROXY_DENY_PROJECT);
	proxy_project_free(p);
}
END_TEST

/* [network "HOST"] rules: globs, first match, a host without rules. */
START_TEST(test_http_rules)
{
	struct proxy_http_rule rules[] = {
	    {"api.example.com", "DELETE", "/**", "deny = DELETE /**", false},
	    {"api.example.com", "GET", "/repos/**", "allow = GET /repos/**",
	     true},
	    {"api.example.com", "POST", "/repos/*/*/pulls",
	     "allow = POST /repos/*/*/pulls", true},
	    {"*.reg.example", "*", "/pkg/*", "allow = * /pkg/*", true},
	};
	struct spd_config c = {.proxy_http_rules = rules,
			       .proxy_nhttp_rules = 4};
	const struct proxy_http_rule *r;
	bool any;

	ck_assert(proxy_path_glob("/repos/**", "/repos/a/b/c"));
	ck_assert(proxy_path_glob("/repos/**", "/repos/"));
	ck_assert(!proxy_path_glob("/repos/**", "/repository"));
	ck_assert(proxy_path_glob("/a/*/c", "/a/b/c"));
	ck_assert(!proxy_path_glob("/a/*/c", "/a/b/x/c"));
	ck_assert(!proxy_path_glob("/a/*", "/a/b/"));
	ck_assert(proxy_path_glob("/**/x", "/a/b/x"));
	r = proxy_http_decide(&c, "api.example.com", "DELETE", "/repos/a",
			      &any);
	ck_assert(any && r == &rules[0]);
	r = proxy_http_decide(&c, "API.example.com", "GET", "/repos/o/r", &any);
	ck_assert(any && r == &rules[1]);
	r = proxy_http_decide(&c, "api.example.com", "POST", "/repos/o/r/pulls",
			      &any);
	ck_assert(any && r == &rules[2]);
	r = proxy_http_decide(&c, "api.example.com", "POST", "/repos/o/r/forks",
			      &any);
	ck_assert(any && r == NULL);
	r = proxy_http_decide(&c, "a.reg.example", "PUT", "/pkg/x", &any);
	ck_assert(any && r == &rules[3]);
	r = proxy_http_decide(&c, "other.example", "GET", "/", &any);
	ck_assert(!any && r == NULL);
	ck_assert(proxy_terminates(&c, "a.reg.example"));
	ck_assert(!proxy_terminates(&c, "reg.example"));
	ck_assert(proxy_path_ambiguous("/repos/../admin"));
	ck_assert(proxy_path_ambiguous("/repos/%2e%2e/admin"));
	/* An encoded slash: decided on both readings (npm's /@scope%2Fname),
	 * refused when they meet different rules or either is ambiguous. */
	ck_assert(!proxy_path_ambiguous("/repos/a%2Fb"));
	ck_assert(proxy_path_ambiguous("/repos/a%2F%2Fb"));
	ck_assert(proxy_path_ambiguous("/repos/a%2f..%2fadmin"));
	ck_assert(proxy_path_ambiguous("/repos/a%2f.%2fb"));
	r = proxy_http_decide(&c, "api.example.com", "GET", "/repos/o%2fr",
			      &any);
	ck_assert(any && r == &rules[1]);
	r = proxy_http_decide(&c, "api.example.com", "POST",
			      "/repos/o%2Fr/x/pulls", &any);
	ck_assert(any && r == NULL);
	r = proxy_http_decide(&c, "a.reg.example", "GET", "/pkg/a%2fb", &any);
	ck_assert(any && r == NULL);
	ck_assert(proxy_path_ambiguous("/repos//x"));
	ck_assert(proxy_path_ambiguous("/repos/.."));
	ck_assert(!proxy_path_ambiguous("/repos/a.b/c..d"));
}
END_TEST

#define Z40 "0000000000000000000000000000000000000000"
#define A40 "a94a8fe5ccb19ba61c4c0873d391e987982fbbd3"
#define B40 "b94a8fe5ccb19ba61c4c0873d391e987982fbbd3"

static size_t pkt(char *out, const char *payload, size_t n)
{
	sprintf(out, "%04zx", n + 4);
	memcpy(out + 4, payload, n);
	return n + 4;
}

/* The ref updates of a push: complete only at the flush, strict. */
START_TEST(test_pkt_commands)
{
	struct proxy_pkt_update u[4];
	char buf[1024];
	const char *why;
	size_t n = 0, k;
	static const char first[] =
	    A40 " " B40 " refs/heads/spd/feat\0report-status side-band-64k";
	static const char second[] = Z40 " " A40 " refs/heads/main\n";

	n += pkt(buf + n, "shallow " A40, 48);
	n += pkt(buf + n, first, sizeof(first) - 1);
	for (size_t i = 0; i < n; i++)
		ck_assert_int_eq(proxy_pkt_commands(buf, i, u, 4, &k, &why), 0);
	n += pkt(buf + n, second, sizeof(second) - 1);
	ck_assert_int_eq(proxy_pkt_commands(buf, n, u, 4, &k, &why), 0);
	memcpy(buf + n, "0000PACK", 8);
	ck_assert_int_eq(proxy_pkt_commands(buf, n + 8, u, 4, &k, &why), 1);
	ck_assert_uint_eq(k, 2);
	ck_assert_str_eq(u[0].ref, "refs/heads/spd/feat");
	ck_assert_str_eq(u[0].old_id, A40);
	ck_assert_str_eq(u[0].new_id, B40);
	ck_assert_str_eq(u[1].ref, "refs/heads/main");
	ck_assert(proxy_oid_zero(u[1].old_id));
	ck_assert(!proxy_oid_zero(u[1].new_id));
	/* Too many updates for the room given. */
	ck_assert_int_eq(proxy_pkt_commands(buf, n + 8, u, 1, &k, &why), -1);
	/* Not pkt-lines, a bad update, a signed push, a flush alone. */
	ck_assert_int_eq(proxy_pkt_commands("zzzz", 4, u, 4, &k, &why), -1);
	n = pkt(buf, A40 " " B40, 81);
	memcpy(buf + n, "0000", 4);
	ck_assert_int_eq(proxy_pkt_commands(buf, n + 4, u, 4, &k, &why), -1);
	n = pkt(buf, "push-cert\0caps\n", 15);
	ck_assert_int_eq(proxy_pkt_commands(buf, n, u, 4, &k, &why), -1);
	ck_assert_int_eq(proxy_pkt_commands("0000", 4, u, 4, &k, &why), -1);
	ck_assert_int_eq(proxy_pkt_commands("0003", 4, u, 4, &k, &why), -1);
}
END_TEST

/* Load text as spd.conf: config_load's result, cfg filled on 0. */
static int load_conf(const char *text, struct spd_config *cfg, char *err,
		     size_t n)
{
	char *dir = test_tmpdir("proxyconf"), *p;
	int r;

	ck_assert(asprintf(&p, "%s/spd.conf", dir) > 0);
	test_write_file(p, text);
	memset(cfg, 0, sizeof(*cfg));
	r = config_load(p, cfg, err, n);
	test_rmrf(dir);
	free(dir);
	free(p);
	return r;
}

static struct proxy_pkt_update upd(const char *old, const char *new_id,
				   const char *ref)
{
	struct proxy_pkt_update u;

	snprintf(u.old_id, sizeof(u.old_id), "%s", old);
	snprintf(u.new_id, sizeof(u.new_id), "%s", new_id);
	snprintf(u.ref, sizeof(u.ref), "%s", ref);
	return u;
}

/* A session's push under a credential's push-ref, push-force and
 * push-delete; without them, its branch only, fast-forward, no
 * deletion (as before they existed). */
START_TEST(test_push_settings)
{
	static const char *const bad[] = {
	    "push-ref = heads/x", "push-ref = refs/heads/a b",
	    "push-ref = refs/heads/../x", "push-force = maybe",
	    "push-delete = 2x"};
	struct spd_config cfg;
	const struct proxy_credential *dflt, *wide;
	struct proxy_pkt_update u;
	char err[512], why[300], text[512];
	const char *sref = "refs/heads/spd/feat";
	bool ff;

	ck_assert_int_eq(load_conf("[credential \"plain\"]\n"
				   "\thost = a.example\n"
				   "\theader = Authorization: Bearer ${T}\n"
				   "[credential \"wide\"]\n"
				   "\thost = b.example\n"
				   "\tbasic = x:${T}\n"
				   "\tpush-ref = session\n"
				   "\tpush-ref = refs/heads/agent/**\n"
				   "\tpush-force = true\n"
				   "\tpush-delete = yes\n",
				   &cfg, err, sizeof(err)),
			 0);
	dflt = proxy_credential_for(&cfg, "a.example");
	wide = proxy_credential_for(&cfg, "b.example");
	ck_assert(dflt && wide && !dflt->push_refs && !dflt->push_force &&
		  !dflt->push_delete && wide->push_force && wide->push_delete);

	/* The defaults (a credential without the keys, or none). */
	for (int i = 0; i < 2; i++) {
		const struct proxy_credential *cr = i ? dflt : NULL;

		u = upd(A40, B40, sref);
		ck_assert_ptr_null(
		    proxy_push_refused(cr, sref, &u, why, sizeof(why), &ff));
		ck_assert(ff);
		u = upd(Z40, B40, sref);
		ck_assert_ptr_null(
		    proxy_push_refused(cr, sref, &u, why, sizeof(why), &ff));
		ck_assert(!ff);
		u = upd(A40, B40, "refs/heads/main");
		ck_assert_ptr_nonnull(
		    proxy_push_refused(cr, sref, &u, why, sizeof(why), &ff));
		ck_assert_msg(strstr(why, "may push only to "
					  "refs/heads/spd/feat"),
			      "%s", why);
		u = upd(A40, Z40, sref);
		ck_assert_ptr_nonnull(
		    proxy_push_refused(cr, sref, &u, why, sizeof(why), &ff));
		ck_assert_str_eq(why,
				 "deleting refs/heads/spd/feat is refused");
		u = upd(A40, B40, sref);
		ck_assert_ptr_nonnull(
		    proxy_push_refused(cr, NULL, &u, why, sizeof(why), &ff));
	}

	/* Configured: the session's branch and those under agent/, any update. */
	u = upd(A40, B40, sref);
	ck_assert_ptr_null(
	    proxy_push_refused(wide, sref, &u, why, sizeof(why), &ff));
	ck_assert(!ff);
	u = upd(A40, B40, "refs/heads/agent/x/y");
	ck_assert_ptr_null(
	    proxy_push_refused(wide, sref, &u, why, sizeof(why), &ff));
	u = upd(A40, Z40, "refs/heads/agent/x");
	ck_assert_ptr_null(
	    proxy_push_refused(wide, sref, &u, why, sizeof(why), &ff));
	u = upd(A40, B40, "refs/heads/main");
	ck_assert_ptr_nonnull(
	    proxy_push_refused(wide, sref, &u, why, sizeof(why), &ff));
	ck_assert_msg(strstr(why, "no push-ref of [credential \"wide\"]"), "%s",
		      why);
	u = upd(A40, B40, "refs/tags/agent/x");
	ck_assert_ptr_nonnull(
	    proxy_push_refused(wide, sref, &u, why, sizeof(why), &ff));
	config_free(&cfg);

	/* Malformed values refuse spd.conf. */
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(text, sizeof(text),
			 "[credential \"c\"]\n\thost = a.example\n"
			 "\theader = A: ${T}\n\t%s\n",
			 bad[i]);
		ck_assert_msg(load_conf(text, &cfg, err, sizeof(err)) < 0,
			      "%s loaded", bad[i]);
		config_free(&cfg);
		ck_assert_msg(strstr(err, "[credential \"c\"]"), "%s: %s",
			      bad[i], err);
	}
}
END_TEST

/* Rules approved for sessions are saved as they are added and read back
 * (a restart); a file spd cannot read refuses the start, naming it. */
START_TEST(test_grants_saved)
{
	struct spd spd = {0};
	char *dir = test_tmpdir("grants"), *p, err[512];

	spd.paths.state_dir = dir;
	ck_assert_int_eq(
	    proxy_grant_add(&spd, "s1", "a.example", "GET", "/repos/**"), 0);
	ck_assert_int_eq(proxy_grant_add(&spd, "s2", "*.b.example", "*", "/x"),
			 0);
	proxy_grants_free(&spd);
	ck_assert(!proxy_granted(&spd, "s1", "a.example", "GET", "/repos/o"));
	ck_assert_int_eq(proxy_grants_load(&spd, err, sizeof(err)), 0);
	ck_assert(proxy_granted(&spd, "s1", "a.example", "GET", "/repos/o"));
	ck_assert(!proxy_granted(&spd, "s2", "a.example", "GET", "/repos/o"));
	ck_assert(proxy_granted(&spd, "s2", "c.b.example", "PUT", "/x"));
	proxy_grants_free(&spd);

	ck_assert(asprintf(&p, "%s/proxy-grants.json", dir) > 0);
	test_write_file(p, "[{\"session\":\"s1\",\"host\":\"a\"}]");
	ck_assert_int_eq(proxy_grants_load(&spd, err, sizeof(err)), -EINVAL);
	ck_assert_msg(strstr(err, p) && strstr(err, "entry 1"), "%s", err);
	test_write_file(p, "[{\"session\"");
	ck_assert_int_eq(proxy_grants_load(&spd, err, sizeof(err)), -EINVAL);
	ck_assert_msg(strstr(err, "will not start"), "%s", err);
	proxy_grants_free(&spd);
	unlink(p);
	ck_assert_int_eq(proxy_grants_load(&spd, err, sizeof(err)), 0);
	ck_assert_ptr_null(spd.proxy_grants);
	free(p);
	test_rmrf(dir);
	free(dir);
}
END_TEST

/* [network "HOST"] preset = NAME: the preset's rules where the line is
 * (a deny before it still wins), named as the preset's; an unknown name
 * refuses spd.conf, listing those there are. */
START_TEST(test_presets)
{
	struct spd_config cfg;
	const struct proxy_http_rule *r;
	char err[512];
	bool any;

	ck_assert_int_eq(load_conf("[network \"registry.example\"]\n"
				   "\tpreset = npm-read\n"
				   "[network \"api.gh.example\"]\n"
				   "\tdeny = GET /admin/**\n"
				   "\tpreset = github-pull-requests\n"
				   "[network \"gh.example\"]\n"
				   "\tpreset = git-read\n",
				   &cfg, err, sizeof(err)),
			 0);
	r = proxy_http_decide(&cfg, "registry.example", "GET", "/@s/p", &any);
	ck_assert(r && r->allow);
	ck_assert_str_eq(r->text, "allow = GET /** (preset npm-read)");
	r = proxy_http_decide(&cfg, "registry.example", "PUT", "/@s/p", &any);
	ck_assert(any && !r);
	r = proxy_http_decide(&cfg, "api.gh.example", "POST",
			      "/repos/o/r/pulls", &any);
	ck_assert(r && r->allow);
	r = proxy_http_decide(&cfg, "api.gh.example", "GET", "/admin/x", &any);
	ck_assert(r && !r->allow);
	r = proxy_http_decide(&cfg, "api.gh.example", "DELETE", "/repos/o/r",
			      &any);
	ck_assert(any && !r);
	r = proxy_http_decide(&cfg, "gh.example", "POST",
			      "/o/r.git/git-upload-pack", &any);
	ck_assert(r && r->allow);
	r = proxy_http_decide(&cfg, "gh.example", "GET", "/o/r.git/info/refs",
			      &any);
	ck_assert(r && r->allow);
	r = proxy_http_decide(&cfg, "gh.example", "POST",
			      "/o/r.git/git-receive-pack", &any);
	ck_assert(any && !r);
	r = proxy_http_decide(&cfg, "gh.example", "GET", "/o/r", &any);
	ck_assert(any && !r);
	ck_assert(proxy_terminates(&cfg, "registry.example"));
	config_free(&cfg);
	ck_assert_int_lt(load_conf("[network \"a.example\"]\n"
				   "\tpreset = everything\n",
				   &cfg, err, sizeof(err)),
			 0);
	config_free(&cfg);
	ck_assert_msg(strstr(err, "preset \"everything\"") &&
			  strstr(err, "npm-read"),
		      "%s", err);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("proxy_rules");
	TCase *tc = tcase_create("rules");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_host_rules);
	tcase_add_test(tc, test_http_rules);
	tcase_add_test(tc, test_pkt_commands);
	tcase_add_test(tc, test_push_settings);
	tcase_add_test(tc, test_grants_saved);
	tcase_add_test(tc, test_presets);
	tcase_add_test(tc, test_address_classes);
	tcase_add_test(tc, test_address_classes_embedded);
	tcase_add_test(tc, test_allow_address);
	tcase_add_test(tc, test_project_tightens);
	tcase_add_test(tc, test_pattern_covered);
	tcase_add_test(tc, test_project_load);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
