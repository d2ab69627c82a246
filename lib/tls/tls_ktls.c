/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What this process's TLS is: OpenSSL's version, where records are made, the counters —
 * for --version and the /tls telemetry command.
 *
 * Whether the kernel has kTLS: ask for the "tls" upper layer protocol on a TCP socket
 * that is not connected. Without CONFIG_TLS the kernel finds no such ULP (ENOENT); with
 * it, the ULP exists but wants an established socket (ENOTCONN). Where it has it and no
 * context turned kTLS off, records are made in the kernel: each connection with AES-GCM
 * hands its records over after the handshake (tls_conn.c, tls_ktls_keys.c).
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sys/socket.h>
#include <stdio.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "cr_eal.h"
#include "cr_telemetry.h"
#include "tls_internal.h"

#ifndef TCP_ULP
#define TCP_ULP 31
#endif

static pthread_once_t probe_once = PTHREAD_ONCE_INIT;
static bool ktls;
static _Atomic bool ktls_off; /* a context with --tls-ktls off */

static void
probe(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return;
	if (setsockopt(fd, IPPROTO_TCP, TCP_ULP, "tls", sizeof("tls")) == 0 || errno == ENOTCONN)
		ktls = true;
	close(fd);
}

bool
cr_tls_ktls_available(void)
{
	pthread_once(&probe_once, probe);
	return ktls;
}

void
cr__tls_ktls_turned_off(void)
{
	atomic_store_explicit(&ktls_off, true, memory_order_relaxed);
}

const char *
cr_tls_record_mode(void)
{
	return cr_tls_ktls_available() && !atomic_load_explicit(&ktls_off, memory_order_relaxed)
		       ? "kernel"
		       : "user-space";
}

static void
version_line(FILE *f, const struct cr_eal_config *cfg)
{
	(void)cfg;
	fprintf(f, "tls: %s, records in %s (kTLS: %s)\n", OpenSSL_version(OPENSSL_VERSION),
		cr_tls_record_mode(),
		cr_tls_ktls_available()
			? "the kernel has it; AES-GCM connections hand over after the handshake"
			: "not in this kernel");
}

__attribute__((constructor)) static void
tls_version_register(void)
{
	cr_eal_set_version_extra(version_line);
}

static int
tel_tls(const char *cmd, const char *params, struct cr_json *j)
{
	struct cr_tls_stats s, t = {0};
	unsigned i;

	(void)cmd;
	(void)params;
	cr_json_object_begin(j, NULL);
	cr_json_array_begin(j, "lcores"); /* those that made a handshake */
	for (i = 0; i < CR_MAX_LCORES; i++) {
		if (cr_tls_stats(i, &s) != 0 || s.handshakes + s.failures + s.timeouts == 0)
			continue;
		cr_json_object_begin(j, NULL);
		cr_json_u64(j, "lcore", i);
		cr_json_u64(j, "handshakes", s.handshakes);
		cr_json_u64(j, "resumed", s.resumed);
		cr_json_object_end(j);
		t.handshakes += s.handshakes;
		t.resumed += s.resumed;
		t.failures += s.failures;
		t.timeouts += s.timeouts;
		t.closes_notified += s.closes_notified;
		t.kernel += s.kernel;
		t.kernel_fallbacks += s.kernel_fallbacks;
	}
	cr_json_array_end(j);
	cr_json_string(j, "library", OpenSSL_version(OPENSSL_VERSION));
	cr_json_string(j, "records", cr_tls_record_mode());
	cr_json_bool(j, "ktls_available", cr_tls_ktls_available());
	cr_json_u64(j, "ticket_key_rotations", cr_tls_tickets_generation());
	cr_json_u64(j, "handshakes", t.handshakes);
	cr_json_u64(j, "resumed", t.resumed);
	cr_json_u64(j, "handshake_failures", t.failures);
	cr_json_u64(j, "handshake_timeouts", t.timeouts);
	cr_json_u64(j, "close_notify_sent", t.closes_notified);
	cr_json_u64(j, "ktls_connections", t.kernel);
	cr_json_u64(j, "ktls_fallbacks", t.kernel_fallbacks);
	cr_json_object_end(j);
	return 0;
}

int
cr_tls_telemetry_register(void)
{
	return cr_telemetry_register("/tls", tel_tls,
				     "TLS: library, where records are made (kTLS or user space), "
				     "handshake totals");
}
