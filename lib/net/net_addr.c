/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * "HOST:PORT" addresses. Only numeric hosts (and "localhost") are accepted: resolving a
 * name can block for seconds, which no lcore may do.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>

#include "cr_eal.h"
#include "cr_net.h"

static int
parse_host(const char *host, bool bracketed, struct cr_net_addr *out)
{
	struct addrinfo hints, *res = NULL;
	int rc;

	memset(out, 0, sizeof(*out));
	if (!bracketed && (host[0] == '\0' || strcmp(host, "*") == 0)) {
		out->u.in4.sin_family = AF_INET;
		out->u.in4.sin_addr.s_addr = htonl(INADDR_ANY);
		out->len = sizeof(out->u.in4);
		return 0;
	}
	if (!bracketed) {
		/* inet_pton, unlike getaddrinfo, takes only a full dotted quad ("1.2.3" is
		 * not 1.2.0.3 here). */
		if (strcmp(host, "localhost") == 0)
			host = "127.0.0.1";
		if (inet_pton(AF_INET, host, &out->u.in4.sin_addr) != 1)
			return -EINVAL;
		out->u.in4.sin_family = AF_INET;
		out->len = sizeof(out->u.in4);
		return 0;
	}
	memset(&hints, 0, sizeof(hints));
	/* No DNS: numeric only. getaddrinfo keeps a scope ("fe80::1%eth0"). */
	hints.ai_flags = AI_NUMERICHOST;
	hints.ai_family = AF_INET6;
	rc = getaddrinfo(host, NULL, &hints, &res);
	if (rc != 0 || res == NULL)
		return -EINVAL;
	if (res->ai_addrlen > sizeof(out->u)) {
		freeaddrinfo(res);
		return -EINVAL;
	}
	memcpy(&out->u, res->ai_addr, res->ai_addrlen);
	out->len = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

int
cr_net_addr_parse(const char *s, struct cr_net_addr *out)
{
	char host[INET6_ADDRSTRLEN + 32];
	const char *colon, *port;
	unsigned long long p;
	struct cr_net_addr a;
	bool bracketed = false;
	size_t hlen;

	if (s == NULL || out == NULL)
		return -EINVAL;
	if (s[0] == '[') {
		const char *close = strchr(s, ']');

		if (close == NULL || close[1] != ':')
			return -EINVAL;
		bracketed = true;
		hlen = (size_t)(close - s - 1);
		colon = close + 1;
		s++;
	} else {
		colon = strrchr(s, ':');
		if (colon == NULL || memchr(s, ':', (size_t)(colon - s)) != NULL)
			return -EINVAL; /* no port, or an IPv6 address without brackets */
		hlen = (size_t)(colon - s);
	}
	if (hlen >= sizeof(host))
		return -EINVAL;
	memcpy(host, s, hlen);
	host[hlen] = '\0';
	port = colon + 1;
	if (cr_parse_uint(port, 0, 65535, &p) != 0)
		return -EINVAL;
	if (parse_host(host, bracketed, &a) != 0)
		return -EINVAL;
	if (a.u.sa.sa_family == AF_INET)
		a.u.in4.sin_port = htons((uint16_t)p);
	else
		a.u.in6.sin6_port = htons((uint16_t)p);
	*out = a;
	return 0;
}

char *
cr_net_addr_format(const struct cr_net_addr *a, char *buf, size_t len)
{
	char host[INET6_ADDRSTRLEN + 16];

	if (len == 0)
		return buf;
	if (a == NULL || a->len == 0) {
		snprintf(buf, len, "?");
		return buf;
	}
	if (a->u.sa.sa_family == AF_INET &&
	    inet_ntop(AF_INET, &a->u.in4.sin_addr, host, sizeof(host)) != NULL) {
		snprintf(buf, len, "%s:%u", host, ntohs(a->u.in4.sin_port));
	} else if (a->u.sa.sa_family == AF_INET6 &&
		   getnameinfo(&a->u.sa, a->len, host, sizeof(host), NULL, 0, NI_NUMERICHOST) ==
			   0) {
		/* getnameinfo, unlike inet_ntop, keeps a link-local address's scope. */
		snprintf(buf, len, "[%s]:%u", host, ntohs(a->u.in6.sin6_port));
	} else {
		snprintf(buf, len, "?");
	}
	return buf;
}

uint16_t
cr_net_addr_port(const struct cr_net_addr *a)
{
	if (a == NULL || a->len == 0)
		return 0;
	if (a->u.sa.sa_family == AF_INET)
		return ntohs(a->u.in4.sin_port);
	if (a->u.sa.sa_family == AF_INET6)
		return ntohs(a->u.in6.sin6_port);
	return 0;
}
