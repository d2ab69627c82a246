/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Whether the kernel has kTLS: ask for the "tls" upper layer protocol on a TCP socket
 * that is not connected. Without CONFIG_TLS the kernel finds no such ULP (ENOENT); with
 * it, the ULP exists but wants an established socket (ENOTCONN). Records are made in
 * user space either way in this version: the kTLS hand-over is not written yet, so
 * cr_tls_record_mode() says "user-space" even where the kernel could take them.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tls_internal.h"

#ifndef TCP_ULP
#define TCP_ULP 31
#endif

static pthread_once_t probe_once = PTHREAD_ONCE_INIT;
static bool ktls;

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

const char *
cr_tls_record_mode(void)
{
	return "user-space";
}
