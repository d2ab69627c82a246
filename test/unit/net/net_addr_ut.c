/* SPDX-License-Identifier: BSD-3-Clause */
/* "HOST:PORT" parsing and formatting (net_addr.c). No runtime needed. */
#include <arpa/inet.h>

#include "ut_net.h"

static void
test_parse_v4(void)
{
	struct cr_net_addr a;
	char buf[CR_NET_ADDR_STRLEN];

	CU_ASSERT_EQUAL(cr_net_addr_parse("127.0.0.1:7000", &a), 0);
	CU_ASSERT_EQUAL(a.u.sa.sa_family, AF_INET);
	CU_ASSERT_EQUAL(a.len, sizeof(struct sockaddr_in));
	CU_ASSERT_EQUAL(cr_net_addr_port(&a), 7000);
	CU_ASSERT_EQUAL(a.u.in4.sin_addr.s_addr, htonl(INADDR_LOOPBACK));
	CU_ASSERT_STRING_EQUAL(cr_net_addr_format(&a, buf, sizeof(buf)), "127.0.0.1:7000");
	CU_ASSERT_EQUAL(cr_net_addr_parse("localhost:0", &a), 0);
	CU_ASSERT_STRING_EQUAL(cr_net_addr_format(&a, buf, sizeof(buf)), "127.0.0.1:0");
	CU_ASSERT_EQUAL(cr_net_addr_parse("*:65535", &a), 0);
	CU_ASSERT_STRING_EQUAL(cr_net_addr_format(&a, buf, sizeof(buf)), "0.0.0.0:65535");
	CU_ASSERT_EQUAL(cr_net_addr_parse(":80", &a), 0);
	CU_ASSERT_STRING_EQUAL(cr_net_addr_format(&a, buf, sizeof(buf)), "0.0.0.0:80");
}

static void
test_parse_v6(void)
{
	struct cr_net_addr a;
	char buf[CR_NET_ADDR_STRLEN];

	CU_ASSERT_EQUAL(cr_net_addr_parse("[::1]:7000", &a), 0);
	CU_ASSERT_EQUAL(a.u.sa.sa_family, AF_INET6);
	CU_ASSERT_EQUAL(a.len, sizeof(struct sockaddr_in6));
	CU_ASSERT_EQUAL(cr_net_addr_port(&a), 7000);
	CU_ASSERT_STRING_EQUAL(cr_net_addr_format(&a, buf, sizeof(buf)), "[::1]:7000");
	CU_ASSERT_EQUAL(cr_net_addr_parse("[::]:1", &a), 0);
	CU_ASSERT_STRING_EQUAL(cr_net_addr_format(&a, buf, sizeof(buf)), "[::]:1");
	CU_ASSERT_EQUAL(cr_net_addr_parse("[2001:db8::5]:443", &a), 0);
	CU_ASSERT_STRING_EQUAL(cr_net_addr_format(&a, buf, sizeof(buf)), "[2001:db8::5]:443");
}

static void
test_parse_errors(void)
{
	static const char *bad[] = {
		"",	      "127.0.0.1",  "127.0.0.1:",	"127.0.0.1:65536", "127.0.0.1:-1",
		"127.0.0.1:8x", "::1:80",	    "[::1]",		"[::1]80",	   "[127.0.0.1]:80",
		"::1",	      "host:80",    "example.com:80", "1.2.3:80",	   "[::1]: 80",
		"1.2.3.4.5:1",
	};
	struct cr_net_addr a = {.len = 77};
	unsigned i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CU_ASSERT_EQUAL(cr_net_addr_parse(bad[i], &a), -EINVAL);
		CU_ASSERT_EQUAL(a.len, 77); /* unchanged */
	}
	CU_ASSERT_EQUAL(cr_net_addr_parse(NULL, &a), -EINVAL);
	CU_ASSERT_EQUAL(cr_net_addr_parse("1.2.3.4:5", NULL), -EINVAL);
}

static void
test_format_edges(void)
{
	struct cr_net_addr a;
	char buf[CR_NET_ADDR_STRLEN], tiny[6];

	memset(&a, 0, sizeof(a));
	CU_ASSERT_STRING_EQUAL(cr_net_addr_format(&a, buf, sizeof(buf)), "?");
	CU_ASSERT_STRING_EQUAL(cr_net_addr_format(NULL, buf, sizeof(buf)), "?");
	CU_ASSERT_EQUAL(cr_net_addr_port(&a), 0);
	CU_ASSERT_EQUAL(cr_net_addr_port(NULL), 0);
	CU_ASSERT_EQUAL(cr_net_addr_parse("10.0.0.1:8080", &a), 0);
	CU_ASSERT_STRING_EQUAL(cr_net_addr_format(&a, tiny, sizeof(tiny)), "10.0.");
}

static const struct ut_case cases[] = {
	UT_CASE(test_parse_v4),
	UT_CASE(test_parse_v6),
	UT_CASE(test_parse_errors),
	UT_CASE(test_format_edges),
};

UT_MAIN("net_addr", cases, ut_rt_setup, NULL)
