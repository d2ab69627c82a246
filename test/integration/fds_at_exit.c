/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * LD_PRELOAD into a program to learn which descriptors it still has open when it exits:
 * at exit (a destructor, after main returned or exit() was called) one line on stderr,
 *   fds at exit: N sockets, M pipes, K others
 * counting /proc/self/fd less 0, 1 and 2. For leaks that only last until the process ends
 * (an lcore stopped by a forced shutdown), which /proc/PID/fd from outside cannot catch.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

__attribute__((destructor)) static void
fds_at_exit(void)
{
	unsigned sockets = 0, pipes = 0, others = 0;
	char path[64], target[256];
	struct dirent *e;
	DIR *d = opendir("/proc/self/fd");
	int self;

	if (d == NULL)
		return;
	self = dirfd(d);
	while ((e = readdir(d)) != NULL) {
		int fd = atoi(e->d_name);
		ssize_t n;

		if (e->d_name[0] == '.' || fd <= 2 || fd == self)
			continue;
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		n = readlink(path, target, sizeof(target) - 1);
		if (n < 0)
			continue;
		target[n] = '\0';
		if (strncmp(target, "socket:", 7) == 0)
			sockets++;
		else if (strncmp(target, "pipe:", 5) == 0)
			pipes++;
		else
			others++;
	}
	closedir(d);
	fprintf(stderr, "fds at exit: %u sockets, %u pipes, %u others\n", sockets, pipes, others);
}
