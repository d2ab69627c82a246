/* SPDX-License-Identifier: BSD-3-Clause */
/* The driver registry and the choice made by --io-driver (doc/guides/design.md "I/O"). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "reactor_internal.h"

CR_LOG_COMPONENT(log_backend, "lib.reactor.backend");

#define MAX_BACKENDS 8

static const struct cr_backend_ops *backends[MAX_BACKENDS];
static unsigned n_backends;

void
cr_backend_register(const struct cr_backend_ops *ops)
{
	if (n_backends < MAX_BACKENDS)
		backends[n_backends++] = ops;
}

const struct cr_backend_ops *
cr_backend_find(const char *name)
{
	unsigned i;

	for (i = 0; i < n_backends; i++)
		if (strcmp(backends[i]->name, name) == 0)
			return backends[i];
	return NULL;
}

static int
try_backend(const char *name, const struct cr_backend_ops **out, char *why, size_t len)
{
	const struct cr_backend_ops *ops = cr_backend_find(name);
	int rc;

	if (ops == NULL) {
		snprintf(why, len, "the %s driver is not built in", name);
		return -ENODEV;
	}
	rc = ops->probe(why, len);
	if (rc == 0)
		*out = ops;
	return rc;
}

/* --version: which driver this configuration would run, and why not the other. */
static void
version_driver(FILE *f, const struct cr_eal_config *cfg)
{
	const struct cr_backend_ops *ops = NULL;
	char why[256] = "";
	const char *asked = cfg->io_driver == CR_IO_DRIVER_URING   ? "uring"
			    : cfg->io_driver == CR_IO_DRIVER_EPOLL ? "epoll"
								   : "auto";

	if (cfg->io_driver != CR_IO_DRIVER_EPOLL &&
	    try_backend("uring", &ops, why, sizeof(why)) == 0) {
		fprintf(f, "io driver: uring (--io-driver %s)\n", asked);
		return;
	}
	if (cfg->io_driver == CR_IO_DRIVER_URING) {
		fprintf(f, "io driver: none: io_uring was refused: %s\n", why);
		return;
	}
	if (try_backend("epoll", &ops, why, sizeof(why)) == 0)
		fprintf(f, "io driver: epoll (--io-driver %s)%s%s\n", asked,
			cfg->io_driver == CR_IO_DRIVER_AUTO ? "; io_uring unavailable: " : "",
			cfg->io_driver == CR_IO_DRIVER_AUTO ? why : "");
	else
		fprintf(f, "io driver: none: %s\n", why);
}

__attribute__((constructor)) static void
version_register(void)
{
	cr_eal_set_version_extra(version_driver);
}

int
cr__select_backend(const struct cr_eal_config *cfg, const struct cr_backend_ops **out)
{
	char why[256] = "";
	int rc;

	switch (cfg->io_driver) {
	case CR_IO_DRIVER_URING:
		rc = try_backend("uring", out, why, sizeof(why));
		if (rc != 0)
			CR_LOG(log_backend, ERR, "--io-driver uring: io_uring was refused: %s", why);
		return rc != 0 ? -ENODEV : 0;
	case CR_IO_DRIVER_EPOLL:
		rc = try_backend("epoll", out, why, sizeof(why));
		if (rc != 0)
			CR_LOG(log_backend, ERR, "--io-driver epoll: %s", why);
		return rc != 0 ? -ENODEV : 0;
	case CR_IO_DRIVER_AUTO:
		break;
	}
	if (try_backend("uring", out, why, sizeof(why)) == 0)
		return 0;
	CR_LOG(log_backend, WARNING, "io_uring unavailable (%s); using the epoll driver", why);
	rc = try_backend("epoll", out, why, sizeof(why));
	if (rc != 0) {
		CR_LOG(log_backend, ERR, "no usable io driver: %s", why);
		return -ENODEV;
	}
	return 0;
}

#define MAX_MODULES 8

static const struct cr_reactor_module *modules[MAX_MODULES];
static unsigned n_modules;

void
cr_reactor_module_register(const struct cr_reactor_module *m)
{
	if (n_modules < MAX_MODULES)
		modules[n_modules++] = m;
}

int
cr__modules_start(unsigned lcore)
{
	unsigned i;
	int rc;

	for (i = 0; i < n_modules; i++) {
		if (modules[i]->lcore_start == NULL)
			continue;
		rc = modules[i]->lcore_start(lcore);
		if (rc != 0) {
			CR_LOG(log_backend, ERR, "lcore %u: module %s failed to start: %s", lcore,
			       modules[i]->name, cr_strerror(rc));
			while (i-- > 0)
				if (modules[i]->lcore_stop != NULL)
					modules[i]->lcore_stop(lcore);
			return rc;
		}
	}
	return 0;
}

/* The lcore begins closing (again, when a shutdown overtakes a retire): in module order. */
void
cr__modules_closing(unsigned lcore, bool shutdown)
{
	unsigned i;

	for (i = 0; i < n_modules; i++)
		if (modules[i]->lcore_closing != NULL)
			modules[i]->lcore_closing(lcore, shutdown);
}

void
cr__modules_stop(unsigned lcore)
{
	unsigned i = n_modules;

	while (i-- > 0)
		if (modules[i]->lcore_stop != NULL)
			modules[i]->lcore_stop(lcore);
}

bool
cr__modules_busy(unsigned lcore, bool forced)
{
	unsigned i;

	/* Pure predicates: a module learns of the closing from lcore_closing. */
	for (i = 0; i < n_modules; i++)
		if (modules[i]->lcore_busy != NULL && modules[i]->lcore_busy(lcore, forced))
			return true;
	return false;
}

struct cr_backend *
cr_reactor_backend(void)
{
	return cr__cur != NULL ? cr__cur->be_own : NULL;
}

const struct cr_backend_ops *
cr_reactor_backend_ops(void)
{
	return cr__rt.ops;
}
