/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Shared by the telemetry suites that reach telemetry's internals: a command dispatched
 * as the server would (its reply checked to be JSON), and the Prometheus text rendered.
 * Include after telemetry_internal.h and tel_ut.h.
 */
#ifndef TEL_INTERNAL_UT_H
#define TEL_INTERNAL_UT_H

/* Answer request line @p req into @p buf (@p cap bytes); the reply, checked to be JSON. */
static inline const char *
tel_ask(char *buf, size_t cap, const char *req)
{
	static struct cr_json j;

	cr_json_init(&j, buf, cap);
	cr__tel_dispatch(req, strlen(req), &j);
	CU_ASSERT_EQUAL(cr_json_finish(&j), 0);
	CU_ASSERT_TRUE(ut_json_valid(cr_json_text(&j)));
	return cr_json_text(&j);
}

/* The whole Prometheus text into @p buf (@p cap bytes), checked not to overflow. */
static inline const char *
tel_render(char *buf, size_t cap)
{
	struct cr__tbuf t;

	cr__tbuf_init(&t, buf, cap);
	cr__prom_render(&t);
	CU_ASSERT_FALSE(t.overflow);
	return buf;
}

#endif /* TEL_INTERNAL_UT_H */
