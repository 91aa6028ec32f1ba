/* SPDX-License-Identifier: MIT */
/*
 * java_child.c - a bench's Java peer as a child process (java_child.h).
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "java_child.h"

static int64_t
mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int
java_child_run(char *const argv[], int64_t timeout_ns,
    void (*on_line)(char *line, void *ctx), void *ctx, char *err,
    size_t errlen)
{
	char buf[8192], *line, *next;
	size_t used = 0;
	int fds[2], st = -1;
	int64_t deadline;
	pid_t pid;
	ssize_t n;

	if (pipe(fds) != 0) {
		snprintf(err, errlen, "pipe: %s", strerror(errno));
		return -1;
	}
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		snprintf(err, errlen, "fork: %s", strerror(errno));
		close(fds[0]);
		close(fds[1]);
		return -1;
	}
	if (pid == 0) {
		close(fds[0]);
		dup2(fds[1], STDOUT_FILENO);
		close(fds[1]);
		execvp(argv[0], argv);
		printf("error cannot run %s: %s\n", argv[0], strerror(errno));
		fflush(stdout);
		_exit(127);
	}
	close(fds[1]);
	deadline = mono_ns() + timeout_ns;
	for (;;) {
		struct pollfd pfd = { fds[0], POLLIN, 0 };
		int64_t left = deadline - mono_ns();

		if (left <= 0) {
			snprintf(err, errlen, "no answer in time (killed)");
			kill(pid, SIGKILL);
			break;
		}
		if (poll(&pfd, 1, (int)(left / 1000000) + 1) <= 0)
			continue;
		n = read(fds[0], buf + used, sizeof(buf) - 1 - used);
		if (n <= 0)
			break;
		used += (size_t)n;
		buf[used] = '\0';
		line = buf;
		while ((next = strchr(line, '\n')) != NULL) {
			*next = '\0';
			on_line(line, ctx);
			line = next + 1;
		}
		used = strlen(line);
		memmove(buf, line, used + 1);
		if (used >= sizeof(buf) - 1)
			used = 0; /* an overlong line: drop it */
	}
	close(fds[0]);
	waitpid(pid, &st, 0);
	return st;
}
