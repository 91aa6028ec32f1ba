/* SPDX-License-Identifier: MIT */
/*
 * peer.h - the small interface through which tpe-bench drives every pool it
 * measures (libtpe and the pools users would pick instead).
 *
 * Design notes
 *   A peer is a table of five operations on an opaque pool, and optional
 *   ones for the scenarios that need other knobs (sizing, producers).
 *   tpe-bench calls create once per measured run, in a fresh child process
 *   (so process-global pools such as libuv's start clean and a crashing or
 *   hanging peer only loses its own run), submits from one or more
 *   threads, and decides by itself when every task has run: each task
 *   bumps a counter, so the completion mechanism is the same for every peer
 *   and is not timed as part of any peer's API. wait_all (the peer's own
 *   "wait until idle", when it has one) is called after the measurement,
 *   as a sanity check, and in oversub's batches, whose subject it is.
 *
 *   All operations return 0 or a positive errno value. submit may be called
 *   from several threads at once; create, wait_all and destroy from one.
 */
#ifndef TPE_BENCH_PEER_H
#define TPE_BENCH_PEER_H

#include <stdbool.h>
#include <stddef.h>

typedef void (*peer_fn)(void *arg);

/*
 * A producer, for the scenarios about which thread runs a produced task
 * (handoff): stores the next task in *fn and *arg and returns true, or
 * returns false when it has none now, and then calls the peer's resume
 * once it has more. Never called by two threads at once.
 */
typedef bool (*peer_produce_fn)(void *ctx, peer_fn *fn, void **arg);

struct peer {
	const char *name; /* short name: table rows, --peer */
	const char *what; /* one line: the configuration measured */

	/* A pool with exactly nthreads worker threads, started (or started
	 * lazily on the first submissions; tpe-bench warms every pool up
	 * before it measures). */
	int (*create)(void **pool, int nthreads);

	/* Run fn(arg) once on a worker. arg is never NULL. */
	int (*submit)(void *pool, peer_fn fn, void *arg);

	/* Optional: each submitting thread calls this after its last submit
	 * (libuv reaps its completions on the submitter's loop). */
	void (*submitter_done)(void *pool);

	/* Optional: the peer's own wait-until-every-task-ran (measured only
	 * in oversub's batches, the pattern of C-Thread-Pool's programs). */
	int (*wait_all)(void *pool);

	/* Stop the workers and free the pool; every task has run. */
	int (*destroy)(void *pool);

	/* Optional: a pool of core..max threads with a bounded queue of
	 * `capacity`, for scenarios about sizing policy (burst). Peers without
	 * these knobs leave it NULL and do not take part. A peer whose create
	 * is NULL takes part only in such scenarios. */
	int (*create_sized)(void **pool, int core, int max, int capacity);

	/* Optional, for the producer scenarios (handoff): a pool of nthreads
	 * threads, `reserved` of them reserved threads, and produce driven
	 * through an execution strategy. A peer with create_producer takes
	 * part only in those scenarios, and those scenarios only have such
	 * peers. run_producer produces in the calling thread; it may return
	 * before every produced task ran, and even before production ended
	 * (production may move to another thread): the scenario counts
	 * completions. resume asks for production to go on after the
	 * producer returned false; it may be called from a task, and never
	 * runs a task in the calling thread. note describes the run in a few
	 * words for the table (say, which thread ran the tasks); it may be
	 * NULL. destroy ends it all, after every produced task ran. */
	int (*create_producer)(void **pool, int nthreads, int reserved,
	    peer_produce_fn produce, void *ctx);
	int (*run_producer)(void *pool);
	int (*resume)(void *pool);
	void (*note)(void *pool, char *buf, size_t len);

	/* Optional, for the blocking scenario (peer_blocking.c): a pool for
	 * `cpus` processors whose tasks block, and how such a task blocks
	 * for ms milliseconds. A peer with create_blocking takes part only
	 * in that scenario, and that scenario only has such peers. */
	int (*create_blocking)(void **pool, int cpus);
	void (*block)(int ms);
	/* Takes part in the tiny scenarios only (create is then set too):
	 * a peer whose submit runs the task in the calling thread, where a
	 * task that blocks or sleeps would hold the submitter. */
	bool tiny_only;
};

/* The spare threads of the managed blocking peer, and the threads the
 * sized one has beyond the processors. */
#define TPE_BENCH_BLK_SPARES 64

/* Peers written in C, compiled in when configure found them. */
extern const struct peer tpe_bench_peer_handrolled;
extern const struct peer tpe_bench_peer_libtpe;
extern const struct peer tpe_bench_peer_libtpe_scale;
extern const struct peer tpe_bench_peer_libtpe_pw;
extern const struct peer tpe_bench_peer_blk_managed;
extern const struct peer tpe_bench_peer_blk_plain;
extern const struct peer tpe_bench_peer_blk_sized;
extern const struct peer tpe_bench_peer_libtpe_metrics;    /* libtpe-m */
extern const struct peer tpe_bench_peer_libtpe_pw_metrics; /* libtpe-pw-m */
extern const struct peer tpe_bench_peer_glib;
extern const struct peer tpe_bench_peer_thpool;
extern const struct peer tpe_bench_peer_uv;
extern const struct peer tpe_bench_peer_ref;
extern const struct peer tpe_bench_peer_threads;
extern const struct peer tpe_bench_peer_inline;
extern const struct peer tpe_bench_peer_strategy_adaptive;
extern const struct peer tpe_bench_peer_strategy_pc;
extern const struct peer tpe_bench_peer_strategy_pec;
extern const struct peer tpe_bench_peer_strategy_epc;

#endif /* TPE_BENCH_PEER_H */
