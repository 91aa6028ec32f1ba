/* SPDX-License-Identifier: MIT */
/*
 * atomic.h - the library's atomics, named by what they are for: thin
 * macros over the compiler's __atomic builtins, so that each access says
 * which access on the other side it pairs with.
 *
 * Where it sits: lib/base, the bottom layer; it includes only system
 * headers, config.h, tpe.h and base/ (build-aux/check-layering.sh).
 *
 * Design notes
 * ------------
 * Every shared word the library touches without a lock goes through one of
 * these names (liburcu's uatomic, Concurrency Kit's ck_pr, in spirit). The
 * name is the contract; the comment at the call names the partner:
 *
 *   tpe__publish(p, v)     release store. Everything the thread wrote before
 *                          it is visible to a thread whose tpe__observe
 *                          reads v (or a later value). Pairs with
 *                          tpe__observe, or with any RMW below.
 *   tpe__observe(p)        acquire load. Pairs with tpe__publish, or with
 *                          an RMW below, on the same word.
 *   tpe__dekker_store(p, v), tpe__dekker_load(p)
 *                          seq_cst store and load, for the store-then-load
 *                          handshakes where each side writes its own word
 *                          and then reads the other's ("I am going to sleep"
 *                          / "I pushed a task"): with seq_cst on both sides,
 *                          at least one of the two threads sees the other's
 *                          store. Release/acquire does NOT give that. Each
 *                          use names its partner pair.
 *   tpe__hint_load(p), tpe__hint_store(p, v)
 *                          relaxed: a value that orders nothing - a hint
 *                          re-checked under a lock or by a stronger access,
 *                          a word read by its only writer, a word written
 *                          under a lock and read without it as a guess.
 *   tpe__counter_add(p, n), tpe__counter_sub(p, n), tpe__counter_read(p)
 *                          relaxed statistics: a count no other data
 *                          depends on. Pairs with nothing.
 *   tpe__owned_add(p, n)   a counter with ONE writer: a relaxed load and a
 *                          release store (no RMW, no locked instruction);
 *                          readers use tpe__observe, which then sees what
 *                          the writer did before the count.
 *   tpe__exchange(p, v), tpe__cas(p, expp, v), tpe__cas_weak(p, expp, v),
 *   tpe__fetch_add(p, n), tpe__fetch_sub(p, n)
 *                          seq_cst read-modify-writes: each is a release
 *                          and an acquire, and takes part in Dekker pairs.
 *                          tpe__cas writes the value it found to *expp on
 *                          failure (the __atomic convention); the weak one
 *                          may fail spuriously (for retry loops only).
 *                          tpe__fetch_add/_sub return the NEW value.
 *                          On x86-64 and AArch64 a seq_cst RMW costs what an
 *                          acq_rel one does, so the library has one kind.
 *
 * Weakly ordered processors (AArch64, 32-bit ARM, POWER, RISC-V; x86 and
 * s390x keep every order but store-then-load): the library leans on no
 * order the C11 model does not promise. No code relies on x86's ordered
 * plain loads and stores, on dependency ("consume") ordering, or on a
 * relaxed access being ordered against anything: a hint is re-checked by
 * a stronger access or under a lock, and a counter orders nothing. The
 * compiler emits the barriers each name above asks for (ldar/stlr on
 * AArch64, dmb on ARMv7, lwsync/sync on POWER, fence on RISC-V).
 * doc/architecture.md, "Memory ordering", lists the pairs.
 *
 * 64-bit atomics on 32-bit processors: the counters of the pool and the
 * metrics are uint64_t. ARMv7, i686 (cmpxchg8b) and RISC-V 64 do them
 * inline; where the compiler calls libatomic instead (armel, mipsel,
 * powerpc), configure links it (ATOMIC_LIBS). A 64-bit word read with a
 * relaxed load is still read whole (the __atomic builtins never tear).
 *
 * TPE__CACHE_LINE is the line size that separates words written by
 * different threads (false sharing), as Linux's L1_CACHE_BYTES: 128 bytes
 * on POWER, 256 on s390x, 64 elsewhere (x86, ARM, RISC-V). Padding wider
 * than the line costs memory only.
 */
#ifndef TPE_ATOMIC_H
#define TPE_ATOMIC_H

#if defined(__powerpc64__)
#define TPE__CACHE_LINE 128
#elif defined(__s390x__)
#define TPE__CACHE_LINE 256
#else
#define TPE__CACHE_LINE 64
#endif

#define tpe__publish(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define tpe__observe(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)

#define tpe__dekker_store(p, v) __atomic_store_n((p), (v), __ATOMIC_SEQ_CST)
#define tpe__dekker_load(p) __atomic_load_n((p), __ATOMIC_SEQ_CST)

#define tpe__hint_load(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define tpe__hint_store(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)

#define tpe__counter_add(p, n) __atomic_add_fetch((p), (n), __ATOMIC_RELAXED)
#define tpe__counter_sub(p, n) __atomic_sub_fetch((p), (n), __ATOMIC_RELAXED)
#define tpe__counter_read(p) __atomic_load_n((p), __ATOMIC_RELAXED)

#define tpe__owned_add(p, n)                                              \
	__atomic_store_n((p), __atomic_load_n((p), __ATOMIC_RELAXED) + (n), \
	    __ATOMIC_RELEASE)

#define tpe__exchange(p, v) __atomic_exchange_n((p), (v), __ATOMIC_SEQ_CST)
#define tpe__cas(p, expp, v)                                              \
	__atomic_compare_exchange_n((p), (expp), (v), 0, __ATOMIC_SEQ_CST, \
	    __ATOMIC_RELAXED)
#define tpe__cas_weak(p, expp, v)                                         \
	__atomic_compare_exchange_n((p), (expp), (v), 1, __ATOMIC_SEQ_CST, \
	    __ATOMIC_RELAXED)
#define tpe__fetch_add(p, n) __atomic_add_fetch((p), (n), __ATOMIC_SEQ_CST)
#define tpe__fetch_sub(p, n) __atomic_sub_fetch((p), (n), __ATOMIC_SEQ_CST)

#endif /* TPE_ATOMIC_H */
