/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * An app built outside the coreact tree against the installed library:
 *   cc -std=c11 main.c $(pkg-config --cflags --libs libcoreact) -o hello
 * Every lcore says hello; the main lcore counts the replies and stops.
 */
#include <stdio.h>

#include "cr_app.h"
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

static int
start(void *arg) /* on the main lcore, once every lcore runs */
{
	unsigned id;

	(void)arg;
	CR_LCORE_FOREACH(id)
	cr_send(id, hello, NULL);
	return 0;
}

static int
fini(bool failed, void *arg)
{
	(void)arg;
	printf("hello: %u replies\n", replies);
	return failed || replies == 0;
}

int
main(int argc, char **argv)
{
	static const struct cr_app app = {
		.name = "hello",
		.summary = "says hello from every lcore",
		.start = start,
		.fini = fini,
	};

	return cr_app_run(&app, argc, argv);
}
