/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * An app built outside the coreact tree against the installed library:
 *   cc main.c $(pkg-config --cflags --libs libcoreact) -o hello
 * Every lcore says hello; the main lcore counts the replies and stops.
 */
#include <stdio.h>

#include "cr_reactor.h"

static unsigned replies;

static void
reply(void *arg) /* runs on the main lcore */
{
	(void)arg;
	if (++replies == cr_lcore_count())
		cr_reactor_stop();
}

static void
hello(void *arg) /* runs on each lcore */
{
	(void)arg;
	printf("hello from lcore %u\n", cr_lcore_id());
	cr_send(cr_lcore_main(), reply, NULL);
}

int
main(int argc, char **argv)
{
	static const struct cr_app_info app = {.name = "hello",
					       .summary = "says hello from every lcore"};
	struct cr_eal_config cfg;
	struct cr_lcore_table table;
	unsigned id;
	int rc;

	cr_eal_config_defaults(&cfg);
	rc = cr_eal_parse_args(argc, argv, &app, &cfg, &table, NULL);
	if (rc != 0)
		return rc > 0 ? 0 : 2;
	rc = cr_reactor_init(&cfg, &table, NULL);
	if (rc != 0) {
		fprintf(stderr, "hello: cannot start: %s\n", cr_strerror(rc));
		return 1;
	}
	CR_LCORE_FOREACH(id)
	cr_send(id, hello, NULL);
	cr_reactor_run();
	cr_reactor_fini();
	printf("hello: %u replies\n", replies);
	return replies >= 1 ? 0 : 1;
}
