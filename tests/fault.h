/* SPDX-License-Identifier: MIT */
/*
 * fault.h - failure injection for the tests linked with
 * -Wl,--wrap=malloc,--wrap=calloc,--wrap=pthread_create (tests/Makefile.inc):
 * armed faults, and the malloc and calloc wrappers that obey them. The
 * including test defines __wrap_pthread_create itself (with fault_hit on
 * create_fault), since what it does around a thread start is its own.
 * Include it in one file of a test binary only: it defines functions.
 *
 * The library's calls (and the test's) go through the __wrap_ functions,
 * which call the real ones unless a test armed a failure. cmocka and libc
 * allocate through their own, unwrapped references, but the arming is kept
 * as narrow as possible anyway: only around the call under test and, for
 * malloc, only for calls from the arming thread.
 */
#ifndef TPE_TESTS_FAULT_H
#define TPE_TESTS_FAULT_H

#include "testutil.h"

#include "pool/node_cache.h"

void *__real_malloc(size_t size);
void *__real_calloc(size_t n, size_t size);
int __real_pthread_create(pthread_t *thread, const pthread_attr_t *attr,
    void *(*start)(void *), void *arg);

void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t n, size_t size);
int __wrap_pthread_create(pthread_t *thread, const pthread_attr_t *attr,
    void *(*start)(void *), void *arg);

/*
 * An armed failure: the first `skip` matching calls succeed, the next
 * `count` fail (count < 0: all of them). Only calls from `thread` match
 * unless `any_thread`. All fields are read and written atomically.
 */
struct fault {
	int armed;
	int any_thread;
	pthread_t thread;
	long skip;
	long count;
	long seen;    /* matching calls while armed */
	long failed;  /* calls made to fail */
};

static struct fault malloc_fault;   /* malloc and calloc share it */
static struct fault create_fault;

static bool
fault_hit(struct fault *f)
{
	long n, count;

	if (!__atomic_load_n(&f->armed, __ATOMIC_SEQ_CST))
		return false;
	if (!__atomic_load_n(&f->any_thread, __ATOMIC_SEQ_CST) &&
	    !pthread_equal(pthread_self(), f->thread))
		return false;
	n = __atomic_fetch_add(&f->seen, 1, __ATOMIC_SEQ_CST);
	if (n < f->skip)
		return false;
	count = f->count;
	if (count >= 0 && n - f->skip >= count)
		return false;
	__atomic_add_fetch(&f->failed, 1, __ATOMIC_SEQ_CST);
	return true;
}

static void
fault_arm(struct fault *f, long skip, long count, bool any_thread)
{
	/* Nodes cached by this thread (lib/node.c) would hide allocations:
	 * every armed call starts from an empty cache. */
	tpe__node_cache_flush();
	f->thread = pthread_self();
	f->skip = skip;
	f->count = count;
	f->seen = 0;
	f->failed = 0;
	__atomic_store_n(&f->any_thread, any_thread ? 1 : 0, __ATOMIC_SEQ_CST);
	__atomic_store_n(&f->armed, 1, __ATOMIC_SEQ_CST);
}

/* Disarms; returns how many calls were made to fail. */
static long
fault_disarm(struct fault *f)
{
	__atomic_store_n(&f->armed, 0, __ATOMIC_SEQ_CST);
	return __atomic_load_n(&f->failed, __ATOMIC_SEQ_CST);
}

void *
__wrap_malloc(size_t size)
{
	if (fault_hit(&malloc_fault)) {
		errno = ENOMEM;
		return NULL;
	}
	return __real_malloc(size);
}

void *
__wrap_calloc(size_t n, size_t size)
{
	if (fault_hit(&malloc_fault)) {
		errno = ENOMEM;
		return NULL;
	}
	return __real_calloc(n, size);
}

#endif /* TPE_TESTS_FAULT_H */
