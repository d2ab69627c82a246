/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * An lcore's state (struct http_lcore, an lcore-local): its connection array, staging
 * buffers, file slots and output buffer, made for every incarnation on the lcore's NUMA
 * node; and its Date timer.
 */
#include <errno.h>

#include "cr_app.h"
#include "http.h"

int http_local = -1;

static void
lcore_fini(void *mem, unsigned lcore, void *arg)
{
	struct http_lcore *hl = mem;

	(void)lcore;
	(void)arg;
	cr_numa_free(hl->conns);
	cr_numa_free(hl->out);
	cr_numa_free(hl->tmp);
	cr_numa_free(hl->stage_mem);
	cr_numa_free(hl->stage_free);
	cr_numa_free(hl->files);
	cr_numa_free(hl->file_free);
	cr_numa_free(hl->buf_mem);
	cr_numa_free(hl->buf_free);
	cr_numa_free(hl->acc_mem);
}

static int
lcore_init(void *mem, unsigned lcore, void *arg)
{
	struct http_lcore *hl = mem;
	int node = cr_lcore_numa(lcore);
	uint32_t i, n = http_cfg.max_conns;

	(void)arg;
	hl->out_cap = 64 * 1024;
	http_ilist_init(&hl->lru);
	/* Address space for every connection's stage and every file slot, touched (and so
	 * backed by memory) only as they are used; LIFO reuse keeps the used set small. */
	hl->conns = cr_numa_zalloc(sizeof(struct http_conn) * n, node);
	hl->out = cr_numa_zalloc(hl->out_cap, node);
	hl->tmp = cr_numa_zalloc(http_cfg.stage_cap, node);
	hl->stage_mem = cr_numa_zalloc((size_t)http_cfg.stage_cap * n, node);
	hl->stage_free = cr_numa_zalloc(sizeof(uint32_t) * n, node);
	if (hl->conns == NULL || hl->out == NULL || hl->tmp == NULL || hl->stage_mem == NULL ||
	    hl->stage_free == NULL)
		goto out_free;
	for (i = 0; i < n; i++)
		hl->stage_free[i] = n - 1 - i;
	hl->stage_nfree = n;
	http_ilist_init(&hl->wait);
	if (http_access_on()) {
		hl->acc_mem = cr_numa_zalloc((size_t)HTTP_ACC_SLOT * n, node);
		if (hl->acc_mem == NULL)
			goto out_free;
	}
	if (http_cfg.root_fd >= 0) {
		/* A slot per connection, each set up when taken (untouched until then). */
		hl->files = cr_numa_zalloc(sizeof(struct http_file) * n, node);
		hl->file_free = cr_numa_zalloc(sizeof(uint32_t) * n, node);
		hl->buf_mem = cr_numa_zalloc((size_t)HTTP_FILE_CHUNK * HTTP_READ_BUFS, node);
		hl->buf_free = cr_numa_zalloc(sizeof(uint32_t) * HTTP_READ_BUFS, node);
		if (hl->files == NULL || hl->file_free == NULL || hl->buf_mem == NULL ||
		    hl->buf_free == NULL)
			goto out_free;
		for (i = 0; i < n; i++)
			hl->file_free[i] = n - 1 - i;
		hl->file_nfree = n;
		for (i = 0; i < HTTP_READ_BUFS; i++)
			hl->buf_free[i] = HTTP_READ_BUFS - 1 - i;
		hl->buf_nfree = HTTP_READ_BUFS;
	}
	return 0;

out_free:
	lcore_fini(hl, lcore, NULL);
	return -ENOMEM;
}

int
http_lcore_register(void)
{
	http_local =
	    cr_lcore_local_register(sizeof(struct http_lcore), lcore_init, lcore_fini, NULL);
	return http_local < 0 ? http_local : 0;
}

int
http_lcore_start(unsigned lcore, void *arg)
{
	(void)lcore;
	(void)arg;
	http_date_start(http_lcore_cur());
	http_static_start(http_lcore_cur());
	return 0;
}

void
http_lcore_stop(unsigned lcore, void *arg)
{
	(void)lcore;
	(void)arg;
	http_date_stop(http_lcore_cur());
	http_static_stop(http_lcore_cur());
}
