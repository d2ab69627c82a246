/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The per-lcore pipe pool for cr_io_splice(): pipes made at lcore start, taken and given
 * back by the app without a syscall in the common case (a stack of free pipes). A pipe
 * given back with bytes in it is drained, or closed and replaced, so the pool never hands
 * out a dirty pipe. An empty pool says -EAGAIN at once: the caller copies instead.
 *
 * Taken pipes are remembered too (a flag per pool slot), so a pipe given back twice, or one
 * that is not the pool's, is refused loudly, and lcore stop closes every pipe, lent or not.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "cr_io.h"
#include "cr_log.h"
#include "cr_reactor.h"
#include "io_pipe.h"

CR_LOG_COMPONENT(log_pipe, "lib.io.pipe");

/* Bytes a returned pipe may hold and still be drained in place (one read). */
#define DRAIN_MAX 65536u

struct pipe_slot {
	struct cr_io_pipe p;
	bool lent;
};

struct pipe_pool {
	struct pipe_slot *slots;
	unsigned *free; /* stack of slot indexes */
	unsigned count, nfree;
	uint32_t size; /* what F_SETPIPE_SZ gave the first pipe */
	uint64_t replaced;
};

static struct pipe_pool pools[CR_MAX_LCORES];
/* What cr_io_pipe_pool() asked for every lcore that starts; read at each lcore's start. */
static _Atomic unsigned want_count;
static _Atomic uint32_t want_size;

static struct pipe_pool *
cur_pool(int *rc)
{
	unsigned id = cr_lcore_id();

	if (id == CR_LCORE_NONE) {
		*rc = -EPERM;
		return NULL;
	}
	if (pools[id].slots == NULL) {
		*rc = -ENOTSUP;
		return NULL;
	}
	return &pools[id];
}

/* A new nonblocking pipe of @p size bytes (or what the system allows: pipe-max-size). */
static int
pipe_make(struct cr_io_pipe *p, uint32_t size, uint32_t *got)
{
	int fds[2], n;

	if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) != 0)
		return -errno;
	n = fcntl(fds[1], F_SETPIPE_SZ, (int)size);
	if (n < 0)
		n = fcntl(fds[1], F_GETPIPE_SZ);
	if (n < 0) {
		n = -errno;
		close(fds[0]);
		close(fds[1]);
		return n;
	}
	p->rd = fds[0];
	p->wr = fds[1];
	*got = (uint32_t)n;
	return 0;
}

int
cr_io_pipe_pool(unsigned count, uint32_t size)
{
	if (count == 0 && size == 0) {
		count = CR_IO_PIPES;
		size = CR_IO_PIPE_SIZE;
	}
	if (size < 4096 || size > 1048576)
		return -EINVAL;
	atomic_store(&want_size, size);
	atomic_store(&want_count, count);
	return 0;
}

int
cr__io_pipes_start(unsigned lcore)
{
	struct pipe_pool *pp = &pools[lcore];
	unsigned count = atomic_load(&want_count);
	uint32_t size = atomic_load(&want_size), got = 0;
	unsigned i;
	int rc;

	pp->count = pp->nfree = 0;
	pp->replaced = 0;
	pp->slots = calloc(count ? count : 1, sizeof(*pp->slots));
	pp->free = calloc(count ? count : 1, sizeof(*pp->free));
	if (pp->slots == NULL || pp->free == NULL) {
		cr__io_pipes_stop(lcore);
		return -ENOMEM;
	}
	for (i = 0; i < count; i++) {
		rc = pipe_make(&pp->slots[i].p, size, &got);
		if (rc != 0) {
			/* Out of fds, say: a smaller pool, not an lcore that cannot start (its
			 * users copy when it is empty). */
			CR_LOG(log_pipe, WARNING, "lcore %u: pipe %u of %u for the pool: %s; "
			       "%u pipes", lcore, i + 1, count, cr_strerror(rc), i);
			break;
		}
		if (got < size && (i == 0 || got < pp->size))
			CR_LOG(log_pipe, INFO,
			       "lcore %u: pipe %u has %u bytes, not %u (fs.pipe-max-size, "
			       "fs.pipe-user-pages-soft)", lcore, i + 1, got, size);
		if (i == 0 || got < pp->size)
			pp->size = got; /* the smallest: what every pipe can hold */
		pp->count++;
	}
	/* Lowest index on top: a quiet lcore reuses the same few pipes. */
	for (i = 0; i < pp->count; i++)
		pp->free[pp->count - 1 - i] = i;
	pp->nfree = pp->count;
	return 0;
}

void
cr__io_pipes_stop(unsigned lcore)
{
	struct pipe_pool *pp = &pools[lcore];
	unsigned i, lent = 0;

	for (i = 0; pp->slots != NULL && i < pp->count; i++) {
		lent += pp->slots[i].lent;
		close(pp->slots[i].p.rd);
		close(pp->slots[i].p.wr);
	}
	if (lent != 0)
		CR_LOG(log_pipe, WARNING, "lcore %u: %u pipes still taken at stop; closed", lcore,
		       lent);
	free(pp->slots);
	free(pp->free);
	*pp = (struct pipe_pool){0};
}

int
cr_io_pipe_get(struct cr_io_pipe *p)
{
	int rc;
	struct pipe_pool *pp = cur_pool(&rc);
	unsigned i;

	if (pp == NULL)
		return rc;
	if (pp->nfree == 0)
		return -EAGAIN;
	i = pp->free[--pp->nfree];
	pp->slots[i].lent = true;
	*p = pp->slots[i].p;
	return 0;
}

/* Empty @p p in place. @return true if it holds nothing now. */
static bool
pipe_drain(const struct cr_io_pipe *p)
{
	static __thread char sink[DRAIN_MAX];
	int n = 0;
	ssize_t k;

	if (ioctl(p->rd, FIONREAD, &n) != 0)
		return false;
	if (n == 0)
		return true;
	if ((unsigned)n > DRAIN_MAX)
		return false;
	k = read(p->rd, sink, (size_t)n);
	return k == n;
}

void
cr_io_pipe_put(const struct cr_io_pipe *p)
{
	int rc;
	struct pipe_pool *pp = cur_pool(&rc);
	struct pipe_slot *s = NULL;
	uint32_t got;
	unsigned i;

	if (pp == NULL)
		return;
	/* Control path size: a pool is tens to hundreds of pipes. */
	for (i = 0; i < pp->count; i++)
		if (pp->slots[i].p.rd == p->rd && pp->slots[i].p.wr == p->wr) {
			s = &pp->slots[i];
			break;
		}
	if (s == NULL || !s->lent) {
		CR_LOG(log_pipe, ERR, "pipe %d/%d given back but not taken from this pool", p->rd,
		       p->wr);
		return;
	}
	if (!pipe_drain(&s->p)) {
		/* Too full to drain cheaply (or broken): a new pipe in its place. */
		close(s->p.rd);
		close(s->p.wr);
		pp->replaced++;
		rc = pipe_make(&s->p, pp->size, &got);
		if (rc != 0) {
			/* The slot is lost until stop; the pool is one smaller. */
			CR_LOG(log_pipe, WARNING, "replacing a dirty pipe: %s", cr_strerror(rc));
			s->p.rd = s->p.wr = -1;
			return;
		}
	}
	s->lent = false;
	pp->free[pp->nfree++] = i;
}

unsigned
cr_io_pipe_free(void)
{
	int rc;
	struct pipe_pool *pp = cur_pool(&rc);

	return pp != NULL ? pp->nfree : 0;
}

uint32_t
cr_io_pipe_size(void)
{
	int rc;
	struct pipe_pool *pp = cur_pool(&rc);

	return pp != NULL ? pp->size : 0;
}
