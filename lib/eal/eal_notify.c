/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Service manager notification (systemd's Type=notify): one datagram of "KEY=VALUE" lines
 * to the unix socket $NOTIFY_SOCKET names, a path or, with a leading '@', an abstract
 * name. Our own code over the protocol sd_notify(3) documents; no libsystemd.
 */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "cr_eal.h"
#include "eal_internal.h"

/* A notification is a few short lines; a longer one is refused rather than cut. */
#define NOTIFY_MAX 4096

static int
notify_addr(const char *name, struct sockaddr_un *sa, socklen_t *len)
{
	size_t n = strlen(name);

	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	if (n < 2 || (name[0] != '/' && name[0] != '@'))
		return -EINVAL;
	if (n >= sizeof(sa->sun_path))
		return -ENAMETOOLONG;
	memcpy(sa->sun_path, name, n);
	/* An abstract name starts with a NUL byte and is not NUL-terminated. */
	if (name[0] == '@')
		sa->sun_path[0] = '\0';
	*len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + (name[0] == '/'));
	return 0;
}

int
cr_sd_notify(const char *state)
{
	const char *name = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sa;
	socklen_t len;
	size_t n;
	ssize_t sent;
	int fd, rc;

	if (state == NULL)
		return -EINVAL;
	if (name == NULL || name[0] == '\0')
		return 0;
	n = strlen(state);
	if (n == 0 || n > NOTIFY_MAX)
		return -EINVAL;
	rc = notify_addr(name, &sa, &len);
	if (rc != 0)
		return rc;
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	sent = sendto(fd, state, n, MSG_NOSIGNAL, (struct sockaddr *)&sa, len);
	rc = sent < 0 ? -errno : (size_t)sent == n ? 0 : -EMSGSIZE;
	close(fd);
	return rc;
}

int
cr_sd_notifyf(const char *fmt, ...)
{
	char buf[NOTIFY_MAX + 1];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n < 0 || n > NOTIFY_MAX)
		return -EINVAL;
	return cr_sd_notify(buf);
}
