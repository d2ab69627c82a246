/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Collectors: families an app writes into the Prometheus text at each scrape, for series
 * whose labels are only known at run time (cr-proxy's backends).
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "telemetry_internal.h"

struct cr_prom {
	struct cr__tbuf *t;
	char name[CR__TEL_FAMILY_LEN + 16]; /* the current family, "" if none or bad */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	cr_telemetry_prom_fn fn;
	void *arg;
} collectors[CR_TELEMETRY_MAX_COLLECTORS];
static _Atomic unsigned n_collectors;

int
cr_telemetry_prom_register(cr_telemetry_prom_fn fn, void *arg)
{
	unsigned n;
	int rc = 0;

	if (fn == NULL)
		return -EINVAL;
	pthread_mutex_lock(&lock);
	n = atomic_load_explicit(&n_collectors, memory_order_relaxed);
	if (n == CR_TELEMETRY_MAX_COLLECTORS) {
		rc = -ENOSPC;
	} else {
		collectors[n].fn = fn;
		collectors[n].arg = arg;
		/* release: pairs with the acquire in cr__prom_render_collectors() */
		atomic_store_explicit(&n_collectors, n + 1, memory_order_release);
	}
	pthread_mutex_unlock(&lock);
	return rc;
}

void
cr_prom_family(struct cr_prom *p, const char *family, enum cr_telemetry_kind kind, const char *help)
{
	p->name[0] = '\0';
	if (!cr__tel_name_ok(family, CR__TEL_FAMILY_LEN) ||
	    (kind != CR_TELEMETRY_COUNTER && kind != CR_TELEMETRY_GAUGE))
		return;
	snprintf(p->name, sizeof(p->name), "coreact_%s%s", family,
		 kind == CR_TELEMETRY_COUNTER ? "_total" : "");
	cr__prom_header(p->t, p->name, kind == CR_TELEMETRY_COUNTER ? "counter" : "gauge",
			help != NULL && help[0] != '\0' ? help : family);
}

static bool
label_name_ok(const char *l)
{
	return cr__tel_name_ok(l, CR__TEL_LABEL_LEN) && strncmp(l, "__", 2) != 0 &&
	       strcmp(l, "le") != 0 && strcmp(l, "quantile") != 0;
}

void
cr_prom_sample(struct cr_prom *p, double value, ...)
{
	const char *label;
	va_list ap;
	bool first = true;
	size_t mark = p->t->len;

	if (p->name[0] == '\0')
		return;
	cr__tbuf_printf(p->t, "%s", p->name);
	va_start(ap, value);
	while ((label = va_arg(ap, const char *)) != NULL) {
		const char *v = va_arg(ap, const char *);

		if (!label_name_ok(label)) {
			/* Take back what this sample wrote. */
			va_end(ap);
			if (!p->t->overflow) {
				p->t->len = mark;
				p->t->buf[mark] = '\0';
			}
			return;
		}
		cr__tbuf_printf(p->t, "%s%s=\"", first ? "{" : ",", label);
		cr__prom_label(p->t, v);
		cr__tbuf_put(p->t, "\"", 1);
		first = false;
	}
	va_end(ap);
	cr__tbuf_printf(p->t, "%s ", first ? "" : "}");
	cr__prom_value(p->t, value);
	cr__tbuf_put(p->t, "\n", 1);
}

void
cr__prom_render_collectors(struct cr__tbuf *t)
{
	/* acquire: pairs with the release in cr_telemetry_prom_register() */
	unsigned i, n = atomic_load_explicit(&n_collectors, memory_order_acquire);
	struct cr_prom p = {.t = t};

	for (i = 0; i < n; i++) {
		p.name[0] = '\0';
		collectors[i].fn(&p, collectors[i].arg);
	}
}
