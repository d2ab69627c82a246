/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Blocking work off the lcores: getaddrinfo, fsync on a slow disk, CPU-heavy work. A job
 * runs on a helper thread; its completion runs back on the lcore that submitted it.
 *
 * Jobs live in a fixed table sized at start (no allocation per job); the queue is bounded
 * and a full one refuses with -EAGAIN. A retiring or shutting-down lcore waits for the
 * jobs it submitted — their completions run on it — before it goes OFFLINE, and refuses
 * new ones with -ESHUTDOWN.
 */
#ifndef CR_OFFLOAD_H
#define CR_OFFLOAD_H

#include "cr_msg.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Run @p fn(@p arg) on a helper thread (it may block), then @p done(@p arg) on the calling
 * lcore. Lcore only. @p arg belongs to the job until @p done runs.
 * @return 0 (@p done will run exactly once); -EPERM off an lcore; -EINVAL @p fn or
 *         @p done NULL; -EAGAIN the queue is full (CR_OFFLOAD_JOBS in flight);
 *         -ESHUTDOWN this lcore is retiring or shutting down, or no helper threads run.
 */
int cr_offload(cr_msg_fn fn, void *arg, cr_msg_fn done);

/** Jobs submitted by the current lcore whose done has not run yet. Lcore only. */
unsigned cr_offload_pending(void);

#ifdef __cplusplus
}
#endif
#endif /* CR_OFFLOAD_H */
