/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * fork_child(i, child, arg) for the C tests that fork while other threads
 * work: fork number `i` runs `child(arg)` in the child, under an alarm of
 * 10 s, and exits with what it returns; 0 when the child exited 0, else 1
 * after saying on stderr how it ended.
 */
#ifndef FI_XPU_TEST_FORK_CHILD_H
#define FI_XPU_TEST_FORK_CHILD_H

#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

static inline int fork_child(int i, int (*child)(void *), void *arg)
{
	int st;
	pid_t p = fork();
	CHECK(p >= 0);
	if (p == 0) {
		alarm(10);
		_exit(child(arg));
	}
	CHECK(waitpid(p, &st, 0) == p);
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return 0;
	fprintf(stderr, "fork %d: child %s %d\n", i,
		WIFSIGNALED(st) ? "killed by signal" : "exited with",
		WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
	return 1;
}

#endif
