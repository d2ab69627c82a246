/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Honest reloads: a SIGHUP applies only the keys the app's reload takes; every other key
 * of the --config file whose value differs from the one the process started with (or that
 * was added or removed since) gets one line saying that it takes effect at a restart,
 * rather than being passed over in silence.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app_internal.h"

static int
find(const struct app_settings *s, const char *key)
{
	unsigned i;

	for (i = 0; i < s->n; i++)
		if (strcmp(s->e[i].key, key) == 0)
			return (int)i;
	return -1;
}

int
cr__settings_add(struct app_settings *s, const char *key, const char *val, const char *where)
{
	int i = find(s, key);

	if (val == NULL)
		val = "";
	if (i >= 0) {
		/* A repeated key: its values in file order, one line each. */
		size_t a = strlen(s->e[i].vals), b = strlen(val);
		char *v = realloc(s->e[i].vals, a + b + 2);

		if (v == NULL)
			return -ENOMEM;
		v[a] = '\n';
		memcpy(v + a + 1, val, b + 1);
		s->e[i].vals = v;
		return 0;
	}
	if (s->n == s->cap) {
		unsigned cap = s->cap != 0 ? s->cap * 2 : 16;
		void *e = realloc(s->e, cap * sizeof(*s->e));

		if (e == NULL)
			return -ENOMEM;
		s->e = e;
		s->cap = cap;
	}
	s->e[s->n].key = strdup(key);
	s->e[s->n].vals = strdup(val);
	snprintf(s->e[s->n].where, sizeof(s->e[s->n].where), "%s", where);
	if (s->e[s->n].key == NULL || s->e[s->n].vals == NULL) {
		free(s->e[s->n].key);
		free(s->e[s->n].vals);
		return -ENOMEM;
	}
	s->n++;
	return 0;
}

void
cr__settings_free(struct app_settings *s)
{
	unsigned i;

	for (i = 0; i < s->n; i++) {
		free(s->e[i].key);
		free(s->e[i].vals);
	}
	free(s->e);
	memset(s, 0, sizeof(*s));
}

unsigned
cr__settings_report(const char *app, const char *path, const struct app_settings *then,
		    const struct app_settings *now, bool (*taken)(const char *key, void *arg),
		    void *arg)
{
	unsigned i, n = 0;

	for (i = 0; i < now->n; i++) {
		int j = find(then, now->e[i].key);

		if (j >= 0 && strcmp(then->e[j].vals, now->e[i].vals) == 0)
			continue;
		fprintf(stderr, "%s: %s: %s: %s; not applied by a reload, takes effect at a "
				"restart\n",
			app, now->e[i].where, now->e[i].key, j >= 0 ? "changed" : "added");
		n++;
	}
	for (i = 0; i < then->n; i++) {
		if (find(now, then->e[i].key) >= 0 || taken(then->e[i].key, arg))
			continue;
		fprintf(stderr, "%s: %s: %s: removed; not applied by a reload, takes effect at a "
				"restart\n",
			app, path, then->e[i].key);
		n++;
	}
	fflush(stderr);
	return n;
}
