/* SPDX-License-Identifier: MIT */
/*
 * java_child.h - runs a Java peer of a bench (bench/java) as a child
 * process and hands its standard output to the caller a line at a time;
 * the benches speak a line protocol with it ("version V", "run v0 v1 ...",
 * "note TEXT", "error TEXT").
 */
#ifndef TPE_BENCH_JAVA_CHILD_H
#define TPE_BENCH_JAVA_CHILD_H

#include <stddef.h>
#include <stdint.h>

/*
 * Runs argv[0] with argv, its standard output on a pipe, and calls
 * on_line(line, ctx) for each complete line (without its newline) until
 * the child closes its output or timeout_ns has passed; then the child is
 * killed and err says so. A line longer than the buffer is dropped.
 * Returns the child's wait status, or -1 when it could not be started
 * (err says why).
 */
int java_child_run(char *const argv[], int64_t timeout_ns,
    void (*on_line)(char *line, void *ctx), void *ctx, char *err,
    size_t errlen);

#endif /* TPE_BENCH_JAVA_CHILD_H */
