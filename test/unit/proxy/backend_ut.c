/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cr-proxy's choice of a backend and its bookkeeping, without a runtime: smooth weighted
 * round robin (exact order), least connections over per-lcore counts, rendezvous hashing
 * of the source (stable, weighted, minimal movement), the table across reloads, marking
 * down and up, and the config file and --backend parsers.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "backend.c"
#include "config.c"
#include "ut_cunit.h"

static struct px_chooser ch;

static void
backend(struct px_backend_conf *b, const char *addr, unsigned weight)
{
	CU_ASSERT_EQUAL_FATAL(cr_net_addr_parse(addr, &b->addr), 0);
	b->weight = weight;
}

/* A fresh table holding @p n backends 127.0.0.1:(9001 + i) with @p weights. */
static void
table(unsigned n, const unsigned *weights)
{
	struct px_backend_conf b[PX_MAX_BACKENDS];
	char a[32];
	unsigned i;

	memset(px_slots, 0, sizeof(px_slots));
	memset(px_counts, 0, sizeof(px_counts));
	memset(&ch, 0, sizeof(ch));
	atomic_store(&n_used, 0);
	px_marking = false;
	for (i = 0; i < n; i++) {
		snprintf(a, sizeof(a), "127.0.0.1:%u", 9001 + i);
		backend(&b[i], a, weights[i]);
	}
	CU_ASSERT_EQUAL_FATAL(px_backends_apply(b, n), 0);
}

static void
test_roundrobin_smooth(void)
{
	static const unsigned w[] = {5, 1, 1};
	/* nginx's documented sequence for weights 5, 1, 1. */
	static const int want[] = {0, 0, 1, 0, 2, 0, 0};
	unsigned i, k;

	table(3, w);
	for (k = 0; k < 3; k++)
		for (i = 0; i < 7; i++)
			CU_ASSERT_EQUAL(px_choose(&ch, PX_ROUNDROBIN, NULL, 0), want[i]);
}

static void
test_candidates(void)
{
	static const unsigned w[] = {1, 0, 1};
	int i;

	table(3, w);
	/* Weight 0 is never chosen; a tried backend is skipped. */
	for (i = 0; i < 10; i++) {
		CU_ASSERT_NOT_EQUAL(px_choose(&ch, PX_ROUNDROBIN, NULL, 0), 1);
		CU_ASSERT_EQUAL(px_choose(&ch, PX_ROUNDROBIN, NULL, 1ull << 0), 2);
		CU_ASSERT_EQUAL(px_choose(&ch, PX_LEASTCONN, NULL, 1ull << 2), 0);
	}
	/* Down or out of the configuration: not a candidate; none left: -1. */
	atomic_store(&px_slots[0].up, false);
	atomic_store(&px_slots[2].in_config, false);
	CU_ASSERT_EQUAL(px_choose(&ch, PX_ROUNDROBIN, NULL, 0), -1);
	CU_ASSERT_EQUAL(px_choose(&ch, PX_LEASTCONN, NULL, 0), -1);
	CU_ASSERT_EQUAL(px_choose(&ch, PX_SOURCE, NULL, 0), -1);
}

static void
test_leastconn(void)
{
	static const unsigned w[] = {1, 1, 2};
	int seen[3] = {0}, i;

	table(3, w);
	px_n_lcores = 2;
	px_lcore_ids[0] = 0;
	px_lcore_ids[1] = 5;
	/* Per unit of weight: 0 -> 3, 1 -> 1 + 1 = 2, 2 -> 4 / 2 = 2: a tie of 1 and 2. */
	atomic_store(&px_counts[0].b[0].active, 3);
	atomic_store(&px_counts[0].b[1].active, 1);
	atomic_store(&px_counts[5].b[1].active, 1);
	atomic_store(&px_counts[5].b[2].active, 4);
	for (i = 0; i < 20; i++)
		seen[px_choose(&ch, PX_LEASTCONN, NULL, 0)]++;
	CU_ASSERT_EQUAL(seen[0], 0);
	CU_ASSERT(seen[1] > 0 && seen[2] > 0); /* ties go round */
	/* Lcore 5's count matters: with it gone, 1 alone is least. */
	atomic_store(&px_counts[5].b[1].active, 0);
	for (i = 0; i < 5; i++)
		CU_ASSERT_EQUAL(px_choose(&ch, PX_LEASTCONN, NULL, 0), 1);
}

static int
source_of(unsigned client)
{
	struct cr_net_addr a;
	char s[32];

	snprintf(s, sizeof(s), "10.%u.%u.%u:1234", (client >> 16) & 255, (client >> 8) & 255,
		 client & 255);
	CU_ASSERT_EQUAL(cr_net_addr_parse(s, &a), 0);
	return px_choose(&ch, PX_SOURCE, &a, 0);
}

static void
test_source(void)
{
	static const unsigned w[] = {3, 1, 1, 1};
	static int before[6000];
	unsigned i, n = 6000, moved = 0, on0 = 0;

	table(4, w);
	for (i = 0; i < n; i++) {
		before[i] = source_of(i);
		CU_ASSERT_EQUAL(source_of(i), before[i]); /* the same client, the same backend */
		on0 += before[i] == 0;
	}
	/* Weight 3 of 6: about half the clients (3000 +- a few percent). */
	CU_ASSERT(on0 > 2700 && on0 < 3300);
	/* Backend 3 goes down: only its own clients move. */
	atomic_store(&px_slots[3].up, false);
	for (i = 0; i < n; i++) {
		int now = source_of(i);

		CU_ASSERT_NOT_EQUAL(now, 3);
		if (before[i] != 3) {
			CU_ASSERT_EQUAL(now, before[i]);
		} else {
			moved++;
		}
	}
	CU_ASSERT(moved > 500 && moved < 1500);
}

static void
test_reload(void)
{
	static const unsigned w[] = {1, 1};
	struct px_backend_conf b[PX_MAX_BACKENDS];
	char a[32];
	unsigned i;

	table(2, w);
	/* 9002 stays (weight 7), 9001 leaves, 9100 is new: slots keep their addresses. */
	backend(&b[0], "127.0.0.1:9100", 1);
	backend(&b[1], "127.0.0.1:9002", 7);
	CU_ASSERT_EQUAL(px_backends_apply(b, 2), 0);
	CU_ASSERT_EQUAL(atomic_load(&n_used), 3);
	CU_ASSERT_STRING_EQUAL(px_slots[2].name, "127.0.0.1:9100");
	CU_ASSERT_FALSE(atomic_load(&px_slots[0].in_config));
	CU_ASSERT_TRUE(atomic_load(&px_slots[1].in_config));
	CU_ASSERT_EQUAL(atomic_load(&px_slots[1].weight), 7);
	for (i = 0; i < 16; i++)
		CU_ASSERT_NOT_EQUAL(px_choose(&ch, PX_ROUNDROBIN, NULL, 0), 0);
	/* Past 64 addresses seen: refused, and nothing changed. */
	for (i = 0; i < PX_MAX_BACKENDS - 2; i++) {
		snprintf(a, sizeof(a), "127.0.0.2:%u", 1000 + i);
		backend(&b[i], a, 1);
	}
	CU_ASSERT_EQUAL(px_backends_apply(b, PX_MAX_BACKENDS - 2), -ENOSPC);
	CU_ASSERT_EQUAL(atomic_load(&n_used), 3);
	CU_ASSERT_TRUE(atomic_load(&px_slots[2].in_config));
	/* Duplicates count once. */
	backend(&b[0], "127.0.0.1:9001", 1);
	backend(&b[1], "127.0.0.1:9001", 2);
	CU_ASSERT_EQUAL(px_backends_apply(b, 2), 0);
	CU_ASSERT_EQUAL(atomic_load(&n_used), 3);
	CU_ASSERT_TRUE(atomic_load(&px_slots[0].in_config));
}

static void
test_marking(void)
{
	static const unsigned w[] = {1};
	unsigned i;

	table(1, w);
	px_fall = 3;
	px_rise = 2;
	/* Without checks nothing marks a backend down. */
	for (i = 0; i < 10; i++)
		px_backend_failed(0);
	CU_ASSERT_TRUE(atomic_load(&px_slots[0].up));
	px_marking = true;
	atomic_store(&px_slots[0].fails, 0);
	px_backend_failed(0);
	px_backend_failed(0);
	px_backend_connected(0); /* a success clears the count */
	px_backend_failed(0);
	px_backend_failed(0);
	CU_ASSERT_TRUE(atomic_load(&px_slots[0].up));
	px_backend_failed(0);
	CU_ASSERT_FALSE(atomic_load(&px_slots[0].up));
	CU_ASSERT_EQUAL(px_choose(&ch, PX_ROUNDROBIN, NULL, 0), -1);
	/* Rise: two good checks in a row, a failure in between starts over. */
	check_ok(0);
	px_backend_failed(0);
	check_ok(0);
	CU_ASSERT_FALSE(atomic_load(&px_slots[0].up));
	check_ok(0);
	CU_ASSERT_TRUE(atomic_load(&px_slots[0].up));
	CU_ASSERT_EQUAL(atomic_load(&px_slots[0].transitions), 2);
	CU_ASSERT_EQUAL(px_choose(&ch, PX_ROUNDROBIN, NULL, 0), 0);
}

static void
test_backend_option(void)
{
	struct px_backend_conf b;

	CU_ASSERT_EQUAL(px_backend_parse("127.0.0.1:80", &b), 0);
	CU_ASSERT_EQUAL(b.weight, 1);
	CU_ASSERT_EQUAL(px_backend_parse("[::1]:80,weight=256", &b), 0);
	CU_ASSERT_EQUAL(b.weight, 256);
	CU_ASSERT_EQUAL(px_backend_parse("127.0.0.1:80,weight=0", &b), 0);
	CU_ASSERT_EQUAL(b.weight, 0);
	CU_ASSERT_EQUAL(px_backend_parse("127.0.0.1:80,weight=257", &b), -EINVAL);
	CU_ASSERT_EQUAL(px_backend_parse("127.0.0.1:80,w=2", &b), -EINVAL);
	CU_ASSERT_EQUAL(px_backend_parse("127.0.0.1:0", &b), -EINVAL);
	CU_ASSERT_EQUAL(px_backend_parse("example.com:80", &b), -EINVAL);
	/* A backend's own --backend-tls name, either order, with or without a weight. */
	CU_ASSERT_EQUAL(px_backend_parse("127.0.0.1:443,sni=a.test", &b), 0);
	CU_ASSERT_STRING_EQUAL(b.sni, "a.test");
	CU_ASSERT_EQUAL(b.weight, 1);
	CU_ASSERT_STRING_EQUAL(b.host, "127.0.0.1");
	CU_ASSERT_EQUAL(px_backend_parse("[::1]:443,sni=b.test,weight=3", &b), 0);
	CU_ASSERT_STRING_EQUAL(b.sni, "b.test");
	CU_ASSERT_EQUAL(b.weight, 3);
	CU_ASSERT_STRING_EQUAL(b.host, "::1");
	CU_ASSERT_EQUAL(px_backend_parse("localhost:443,weight=2", &b), 0);
	CU_ASSERT_STRING_EQUAL(b.host, "localhost");
	CU_ASSERT_STRING_EQUAL(b.sni, "");
	CU_ASSERT_EQUAL(px_backend_parse("127.0.0.1:443,sni=a b", &b), -EINVAL);
	CU_ASSERT_EQUAL(px_backend_parse("127.0.0.1:443,sni=", &b), -EINVAL);
	CU_ASSERT_EQUAL(px_backend_parse("127.0.0.1:443,sni", &b), -EINVAL);
	CU_ASSERT_EQUAL(px_backend_parse("127.0.0.1:443,,weight=2", &b), -EINVAL);
}

/* A --config line as lib/app applies it: the key's option, the rest of the line. */
static int
line(const char *key, const char *val)
{
	static const struct cr_app_info info = {"cr-proxy", "", px_options, PX_N_OPTIONS};
	struct cr_eal_config cfg;

	cr_eal_config_defaults(&cfg);
	return cr_eal_apply_opt(&info, &cfg, key, val, "t.conf:1");
}

static void
test_config_keys(void)
{
	struct px_conf *c = &px_conf;
	struct px_backend_conf b;

	px_conf_defaults(c);
	CU_ASSERT_EQUAL(line("listen", "127.0.0.1:8080"), 0);
	CU_ASSERT_EQUAL(line("balance", "source"), 0);
	CU_ASSERT_EQUAL(line("backend", "127.0.0.1:9001 weight 3"), 0);
	CU_ASSERT_EQUAL(line("backend", "[::1]:9002"), 0);
	CU_ASSERT_EQUAL(line("connect-timeout", "0.25"), 0);
	CU_ASSERT_EQUAL(line("retries", "0"), 0);
	CU_ASSERT_EQUAL(line("check-interval", "0"), 0);
	CU_ASSERT_EQUAL(line("check-timeout", "1"), 0);
	CU_ASSERT_EQUAL(line("rise", "5"), 0);
	CU_ASSERT_EQUAL(line("fall", "4"), 0);
	CU_ASSERT_EQUAL(line("client-timeout", "7"), 0);
	CU_ASSERT_EQUAL(line("server-timeout", "8"), 0);
	CU_ASSERT_EQUAL(line("maxconn", "10"), 0);
	CU_ASSERT_EQUAL(c->chunks, 0); /* auto: from --maxconn */
	CU_ASSERT_EQUAL(line("buffers", "400"), 0);
	CU_ASSERT_EQUAL(px_conf_finish(), 0);
	CU_ASSERT_EQUAL(cr_net_addr_port(&c->listen), 8080);
	CU_ASSERT_EQUAL(c->balance, PX_SOURCE);
	CU_ASSERT_EQUAL(c->n_backends, 2);
	CU_ASSERT_EQUAL(c->backends[0].weight, 3);
	CU_ASSERT_EQUAL(c->backends[1].weight, 1);
	CU_ASSERT_EQUAL(c->backends[1].addr.u.sa.sa_family, AF_INET6);
	CU_ASSERT_DOUBLE_EQUAL(c->connect_timeout, 0.25, 1e-9);
	CU_ASSERT_EQUAL(c->retries, 0);
	CU_ASSERT_DOUBLE_EQUAL(c->check_interval, 0, 1e-9);
	CU_ASSERT_EQUAL(c->rise, 5);
	CU_ASSERT_EQUAL(c->fall, 4);
	CU_ASSERT_DOUBLE_EQUAL(c->server_timeout, 8, 1e-9);
	CU_ASSERT_EQUAL(c->maxconn, 10);
	CU_ASSERT_EQUAL(c->chunks, 400);
	/* At least the reserve and one session's share; "auto" again. */
	CU_ASSERT_EQUAL(line("buffers", "349"), -EINVAL);
	CU_ASSERT_EQUAL(line("buffers", "350"), 0);
	CU_ASSERT_EQUAL(line("buffers", "4194305"), -EINVAL);
	CU_ASSERT_EQUAL(line("buffers", "auto"), 0);
	CU_ASSERT_EQUAL(c->chunks, 0);
	/* The file's form of a backend line, and its bad forms (the line goes to stderr). */
	CU_ASSERT_EQUAL(px_backend_parse("127.0.0.1:80 weight 0", &b), 0);
	CU_ASSERT_EQUAL(b.weight, 0);
	CU_ASSERT_EQUAL(px_backend_parse("127.0.0.1:80 sni a.test weight 2", &b), 0);
	CU_ASSERT_STRING_EQUAL(b.sni, "a.test");
	CU_ASSERT_EQUAL(b.weight, 2);
	CU_ASSERT_EQUAL(line("backend", "127.0.0.1:9 sni"), -EINVAL);
	CU_ASSERT_EQUAL(line("backend", "127.0.0.1:9 sni a..b"), -EINVAL);
	CU_ASSERT_EQUAL(line("backend", "127.0.0.1:9 weight"), -EINVAL);
	CU_ASSERT_EQUAL(line("backend", "127.0.0.1:9 heavy 3"), -EINVAL);
	CU_ASSERT_EQUAL(line("backend", "127.0.0.1:9 weight 900"), -EINVAL);
	CU_ASSERT_EQUAL(line("listen", "127.0.0.1:1 extra"), -EINVAL);
	CU_ASSERT_EQUAL(line("rise", "0"), -EINVAL);
	CU_ASSERT_EQUAL(line("maxconn", "1048577"), -EINVAL);
	CU_ASSERT_EQUAL(line("client-timeout", "-1"), -EINVAL);
	CU_ASSERT_EQUAL(line("Listen", "127.0.0.1:1"), -EINVAL);
}

static const struct ut_case cases[] = {
    UT_CASE(test_roundrobin_smooth),
    UT_CASE(test_candidates),
    UT_CASE(test_leastconn),
    UT_CASE(test_source),
    UT_CASE(test_reload),
    UT_CASE(test_marking),
    UT_CASE(test_backend_option),
    UT_CASE(test_config_keys),
};

UT_MAIN("cr_proxy_backend", cases, NULL, NULL)
