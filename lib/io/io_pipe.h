/* SPDX-License-Identifier: BSD-3-Clause */
/* The per-lcore pipe pool (io_pipe.c), started and stopped by lib/io's lcore hooks. */
#ifndef IO_PIPE_H
#define IO_PIPE_H

#include <stdint.h>

/**
 * Create the pipes cr_io_pipe_pool() asked for @p lcore (none unless it was called; fewer
 * if fds run out: logged). @return 0 or -ENOMEM.
 */
int cr__io_pipes_start(unsigned lcore);
/** Close every pipe of @p lcore's pool, taken ones included (no op uses them by now). */
void cr__io_pipes_stop(unsigned lcore);

#endif /* IO_PIPE_H */
