/* SPDX-License-Identifier: BSD-3-Clause */
/* One CUnit suite per binary: register, run verbose, exit 1 on any failure. */
#ifndef UT_CUNIT_H
#define UT_CUNIT_H

#include <CUnit/Basic.h>

struct ut_case {
	const char *name;
	void (*fn)(void);
};

static inline int
ut_run_suite(const char *suite, const struct ut_case *cases, unsigned n,
	     int (*init)(void), int (*fini)(void))
{
	CU_pSuite s;
	unsigned i, failures;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	s = CU_add_suite(suite, init, fini);
	for (i = 0; s != NULL && i < n; i++)
		CU_add_test(s, cases[i].name, cases[i].fn);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	failures = CU_get_number_of_failures() + CU_get_number_of_suites_failed();
	CU_cleanup_registry();
	return failures != 0 ? 1 : 0;
}

#define UT_CASE(f) {#f, f}
#define UT_MAIN(suite, cases, init, fini)                                                  \
	int main(void)                                                                     \
	{                                                                                  \
		return ut_run_suite(suite, cases, sizeof(cases) / sizeof(cases[0]), init,  \
				    fini);                                                 \
	}

#endif /* UT_CUNIT_H */
