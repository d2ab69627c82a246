/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * SipHash (Aumasson and Bernstein, "SipHash: a fast short-input PRF", 2012): a keyed
 * 64-bit hash. With a secret random key, a client cannot choose keys that collide in the
 * store's table or pile up on one shard, which an unkeyed hash cannot prevent.
 *
 * kv_siphash() is SipHash-1-3 (one compression round per word, three finalisation
 * rounds), the variant the authors suggest for hash tables (Python and Rust use it);
 * kv_siphash_cr() takes the round counts, for the test vectors of SipHash-2-4.
 */
#ifndef CR_KV_SIPHASH_H
#define CR_KV_SIPHASH_H

#include <stddef.h>
#include <stdint.h>

uint64_t kv_siphash(const uint8_t key[16], const void *data, size_t len);
uint64_t kv_siphash_cr(const uint8_t key[16], const void *data, size_t len, unsigned c, unsigned d);

#endif /* CR_KV_SIPHASH_H */
