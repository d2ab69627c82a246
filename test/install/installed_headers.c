/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The body of the installed-headers test: the script puts an #include of every installed
 * header above it, nothing else. It calls into each library, off any lcore, where that is
 * defined to be harmless, so the link needs every part of libcoreact.
 */
static int
check(int ok, const char *what)
{
	if (!ok)
		printf("FAIL: %s\n", what);
	return ok ? 0 : 1;
}

int
main(void)
{
	struct cr_eal_config cfg;
	struct cr_net_addr a;
	struct cr_lease lease = CR_LEASE_INIT;
	struct cr_msg m = {NULL, NULL};
	int fails = 0;

	cr_eal_config_defaults(&cfg);
	fails += check(cfg.shutdown_timeout == 10, "cr_eal_config_defaults");
	fails += check(cr_strerror(-1)[0] != '\0', "cr_strerror");
	fails += check(cr_lcore_id() == CR_LCORE_NONE, "cr_lcore_id off an lcore");
	fails += check(cr_send(0, NULL, NULL) < 0, "cr_send without a runtime");
	fails += check(cr_net_addr_parse("127.0.0.1:80", &a) == 0 && cr_net_addr_port(&a) == 80,
		       "cr_net_addr_parse");
	fails += check(!cr_lease_active(&lease), "cr_lease_active");
	fails += check(cr_telemetry_socket_path() == NULL, "cr_telemetry_socket_path");
	fails += check(cr_offload(NULL, NULL, NULL) != 0, "cr_offload off an lcore");
	fails += check(m.fn == NULL && sizeof(m) == 16, "struct cr_msg");
	fails += check(cr_app_name() == NULL && cr_lcore_local(0) == NULL, "lib/app outside a run");
	if (fails == 0)
		printf("installed headers: one C11 program, linked with pkg-config --libs: OK\n");
	return fails != 0;
}
