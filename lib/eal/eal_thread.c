/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Pinned, named threads.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "cr_eal.h"
#include "eal_internal.h"

/* Linux's limit on a thread name, terminator included. */
#define THREAD_NAME_MAX 16

struct cr_thread {
	pthread_t tid;
	void *(*fn)(void *);
	void *arg;
	char name[THREAD_NAME_MAX];
};

/* A cpu_set_t holding only @p cpu, sized for it; free with CPU_FREE. */
static cpu_set_t *
cpu_set_of(unsigned cpu, size_t *size)
{
	cpu_set_t *set;

	if (cpu >= INT32_MAX) {
		errno = EINVAL;
		return NULL;
	}
	set = CPU_ALLOC(cpu + 1);
	if (set == NULL)
		return NULL;
	*size = CPU_ALLOC_SIZE(cpu + 1);
	CPU_ZERO_S(*size, set);
	CPU_SET_S(cpu, *size, set);
	return set;
}

int
cr_thread_pin_self(unsigned cpu)
{
	size_t size;
	cpu_set_t *set = cpu_set_of(cpu, &size);
	int rc;

	if (set == NULL)
		return -errno;
	rc = pthread_setaffinity_np(pthread_self(), size, set);
	CPU_FREE(set);
	return -rc;
}

/* Runs in the new thread, already pinned by its attributes: name it, then run fn. */
static void *
thread_start(void *p)
{
	struct cr_thread *t = p;

	if (t->name[0] != '\0')
		pthread_setname_np(pthread_self(), t->name);
	return t->fn(t->arg);
}

/* The affinity the process started with, before any lcore pinned the main thread. */
static cpu_set_t initial_affinity;
static bool have_initial_affinity;

__attribute__((constructor)) static void
record_initial_affinity(void)
{
	have_initial_affinity =
		sched_getaffinity(0, sizeof(initial_affinity), &initial_affinity) == 0;
}

int
cr_thread_unpin_self(void)
{
	if (!have_initial_affinity)
		return -ENOTSUP;
	return -pthread_setaffinity_np(pthread_self(), sizeof(initial_affinity),
				       &initial_affinity);
}

int
cr_thread_create(void **handle, unsigned cpu, const char *name, void *(*fn)(void *), void *arg)
{
	struct cr_thread *t;
	pthread_attr_t attr;
	cpu_set_t *set;
	size_t size;
	int rc;

	if (handle == NULL || fn == NULL || (name != NULL && strlen(name) >= THREAD_NAME_MAX))
		return -EINVAL;
	t = calloc(1, sizeof(*t));
	if (t == NULL)
		return -ENOMEM;
	t->fn = fn;
	t->arg = arg;
	if (name != NULL)
		memcpy(t->name, name, strlen(name) + 1);
	if (cpu == CR_CPU_ANY) {
		/* Unpinned: inherits the creator's affinity. */
		rc = -pthread_create(&t->tid, NULL, thread_start, t);
		if (rc != 0)
			goto out_free_thread;
		*handle = t;
		return 0;
	}
	set = cpu_set_of(cpu, &size);
	if (set == NULL) {
		rc = -errno;
		goto out_free_thread;
	}
	rc = -pthread_attr_init(&attr);
	if (rc != 0)
		goto out_free_set;
	/* Set in the attributes, the affinity is in force before the thread's first instruction. */
	rc = -pthread_attr_setaffinity_np(&attr, size, set);
	if (rc == 0)
		rc = -pthread_create(&t->tid, &attr, thread_start, t);
	pthread_attr_destroy(&attr);
	if (rc != 0)
		goto out_free_set;
	CPU_FREE(set);
	*handle = t;
	return 0;

out_free_set:
	CPU_FREE(set);
out_free_thread:
	free(t);
	return rc;
}

bool
cr_thread_is_self(const void *handle)
{
	const struct cr_thread *t = handle;

	return t != NULL && pthread_equal(t->tid, pthread_self());
}

int
cr_thread_join(void *handle)
{
	struct cr_thread *t = handle;
	int rc;

	if (t == NULL)
		return -EINVAL;
	rc = pthread_join(t->tid, NULL);
	if (rc != 0)
		return -rc;
	free(t);
	return 0;
}

int
cr_thread_detach(void *handle)
{
	struct cr_thread *t = handle;
	int rc;

	if (t == NULL)
		return -EINVAL;
	rc = pthread_detach(t->tid);
	if (rc != 0)
		return -rc;
	free(t);
	return 0;
}
