/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Fault injection in lib/io's completion path, for tests only (test/unit/io's
 * io_fault_shim.c sets it). Never installed: not part of the driver interface.
 */
#ifndef IO_FAULT_HOOK_H
#define IO_FAULT_HOOK_H

#include "cr_io_driver.h"

/* NULL unless a test set it: rewrites a completion before the callback sees it. */
extern void (*cr__io_fault_hook)(const struct cr_op *op, struct cr_io_cqe *cqe);

#endif /* IO_FAULT_HOOK_H */
