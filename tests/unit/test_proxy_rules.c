/*
 * The egress proxy's decisions without I/O (daemon/proxy/rules.c): host
 * names against [network] allow-host, deny-host and ask-host, and the
 * address classes a name must not lead to.
 */
#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

#include "daemon/proxy/proxy.h"
#include "daemon/spd.h"

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

int main(void)
{
	Suite *s = suite_create("proxy_rules");
	TCase *tc = tcase_create("rules");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_host_rules);
	tcase_add_test(tc, test_address_classes);
	tcase_add_test(tc, test_allow_address);
	tcase_add_test(tc, test_project_tightens);
	tcase_add_test(tc, test_pattern_covered);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
