/* SPDX-License-Identifier: MIT */
/*
 * test_debug.c - the checks of --enable-debug (lib/sync.h): a _locked
 * function called without its lock, a failed TPE__ASSERT, a relock and an
 * unlock by a thread that does not hold the mutex each abort with a line
 * naming the file and line; lock ownership follows a condition wait; and a
 * release build compiles every check away. Links the uninstalled core
 * library.
 *
 * The failing calls run in a child process with its standard error on a
 * pipe; the child never calls cmocka. Cases whose call would hang or be
 * undefined once its check is compiled away (a relock, a wait without the
 * lock) skip when TPE_DEBUG is not defined, and only then: the CI runs the
 * suite once configured with --enable-debug, where every case runs.
 */
#include "helpers.h"

#include <regex.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>

#include "pool/pool.h"
#include "base/sync.h"

struct child_result {
	int status;     /* waitpid's */
	char err[1024]; /* what the child wrote to stderr, NUL-terminated */
};

/* Runs fn in a child whose stderr is a pipe; fn returning means exit 0. */
static struct child_result
run_child(void (*fn)(void))
{
	struct child_result r;
	struct rlimit no_core = { 0, 0 };
	size_t len = 0;
	ssize_t n;
	pid_t pid;
	int fd[2];

	memset(&r, 0, sizeof(r));
	assert_int_equal(pipe(fd), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(fd[0]);
		if (dup2(fd[1], STDERR_FILENO) < 0)
			_exit(98);
		/* An expected abort: no core file, no framework handler. */
		setrlimit(RLIMIT_CORE, &no_core);
		signal(SIGABRT, SIG_DFL);
		fn();
		_exit(0);
	}
	close(fd[1]);
	while (len < sizeof(r.err) - 1 &&
	    (n = read(fd[0], r.err + len, sizeof(r.err) - 1 - len)) != 0) {
		if (n < 0) {
			assert_int_equal(errno, EINTR);
			continue;
		}
		len += (size_t)n;
	}
	close(fd[0]);
	while (waitpid(pid, &r.status, 0) < 0)
		assert_int_equal(errno, EINTR);
	return r;
}

#ifdef TPE_DEBUG
/* The child died of abort() and its stderr matches the extended regex. */
static void
assert_died_saying(const struct child_result *r, const char *pattern)
{
	regex_t re;

	if (!WIFSIGNALED(r->status) || WTERMSIG(r->status) != SIGABRT)
		fail_msg("child status %#x, stderr \"%s\"", r->status, r->err);
	assert_int_equal(regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB), 0);
	if (regexec(&re, r->err, 0, NULL, 0) != 0)
		fail_msg("stderr \"%s\" does not match \"%s\"", r->err,
		    pattern);
	regfree(&re);
}
#else
/* The child returned normally and wrote nothing. */
static void
assert_exited_quietly(const struct child_result *r)
{
	if (!WIFEXITED(r->status) || WEXITSTATUS(r->status) != 0)
		fail_msg("child status %#x, stderr \"%s\"", r->status, r->err);
	assert_string_equal(r->err, "");
}
#endif

/* The pattern of a fatal error in FILE.c, any line, then REST. */
#define DIES_IN(file, rest)                                                \
	"^libtpe: ([^ ]*/)?" file "\\.c:[0-9]+: " rest "\n$"

/*
 * Runs fn in a child. In a debug build it must abort, its stderr matching
 * `pattern`. In a release build it must return quietly when `release_runs`
 * (the check compiled away); otherwise fn would hang or be undefined there
 * without the check, and the case is skipped.
 */
static void
assert_checked(void (*fn)(void), bool release_runs, const char *pattern)
{
	struct child_result r;

#ifdef TPE_DEBUG
	(void)release_runs;
	r = run_child(fn);
	assert_died_saying(&r, pattern);
#else
	(void)pattern;
	if (!release_runs) {
		print_message("# SKIP: a release build (no --enable-debug) has no such check, and without it the case would hang or be undefined\n");
		skip();
	}
	r = run_child(fn);
	assert_exited_quietly(&r);
#endif
}

/* ---- a _locked function without its lock ----------------------------- */

static void
terminate_unlocked(void)
{
	tpe_t *pool;

	if (tpe_create(&pool, NULL) != 0)
		_exit(97);
	/* A running pool: a release build just answers false. */
	if (tpe__pool_try_terminate_locked(pool))
		_exit(96);
}

static void
test_debug_locked_function_needs_its_lock(void **state)
{
	(void)state;
	assert_checked(terminate_unlocked, true, DIES_IN("pool",
	    "tpe__pool_try_terminate_locked: "
	    "&pool->lock not held by this thread"));
}

/* A module below the pool gets the pool's lock as an argument (the submit
 * line, the reserve): it checks that lock too. */
static void
line_unlocked(void)
{
	struct tpe__submit_line line;
	struct tpe__mutex lock;

	memset(&line, 0, sizeof(line));
	tpe__mutex_init(&lock);
	tpe__submit_line_wake_all_locked(&line, &lock);
}

static void
test_debug_passed_lock_is_checked(void **state)
{
	(void)state;
	/* A release build has no check: the empty line wakes nobody. */
	assert_checked(line_unlocked, true, DIES_IN("submit_line",
	    "tpe__submit_line_wake_all_locked: lock not held by this thread"));
}

/* ---- TPE__ASSERT ----------------------------------------------------- */

static int evaluations; /* how often the expression below ran */

/* Fails a TPE__ASSERT when `fail` (in the child); returns its line. */
static int
assert_at(bool fail)
{
	int line = __LINE__ + 1;
	TPE__ASSERT(!fail || ++evaluations == 0);
	return line;
}

static void
assert_fails(void)
{
	assert_at(true);
}

static void
test_debug_assert_names_file_and_line(void **state)
{
	char pattern[256];

	(void)state;
	snprintf(pattern, sizeof(pattern), "^libtpe: ([^ ]*/)?test_debug\\.c:"
	    "%d: assert_at: assertion failed: "
	    "!fail \\|\\| \\+\\+evaluations == 0\n$", assert_at(false));
	assert_checked(assert_fails, true, pattern);
	/* Only the child failed it: here the expression never got that far. */
	assert_int_equal(evaluations, 0);
}

/* A debug build evaluates an assertion's expression once; a release build
 * never, nor looks at a lock, and its mutex is a pthread_mutex_t and
 * nothing more. */
static void
test_debug_checks_compile_away_in_release(void **state)
{
	struct tpe__mutex m;
	int n = 0;

	(void)state;
	TPE__ASSERT(++n == 1);
	tpe__mutex_init(&m);
#ifdef TPE_DEBUG
	assert_int_equal(n, 1);
	assert_true(sizeof(struct tpe__mutex) > sizeof(pthread_mutex_t));
#else
	TPE__ASSERT_HELD(&m); /* not held, and nobody looks */
	assert_int_equal(n, 0);
	assert_int_equal(sizeof(struct tpe__mutex), sizeof(pthread_mutex_t));
#endif
	tpe__mutex_destroy(&m);
}

/* ---- error-checking mutexes ------------------------------------------ */

static void
lock_twice(void)
{
	struct tpe__mutex m;

	tpe__mutex_init(&m);
	tpe__mutex_lock(&m);
	tpe__mutex_lock(&m);
}

static void
test_debug_relock_dies(void **state)
{
	(void)state;
	/* A release build would deadlock. */
	assert_checked(lock_twice, false, DIES_IN("sync",
	    "tpe__mutex_lock: pthread_mutex_lock: [^\n]+"));
}

static void
unlock_unheld(void)
{
	struct tpe__mutex m;

	tpe__mutex_init(&m);
	tpe__mutex_unlock(&m);
}

static void
test_debug_unlock_without_holding_dies(void **state)
{
	(void)state;
	/* Undefined in a release build. */
	assert_checked(unlock_unheld, false, DIES_IN("sync",
	    "tpe__mutex_unlock: m not held by this thread"));
}

/* ---- the lock order (base/sync.h): a rank per lock ------------------- */

/* A FUTURE lock, then a POOL lock: against the order. */
static void
order_reversed(void)
{
	struct tpe__mutex future, pool;

	tpe__mutex_init_ranked(&future, TPE__RANK_FUTURE);
	tpe__mutex_init_ranked(&pool, TPE__RANK_POOL);
	tpe__mutex_lock(&future);
	tpe__mutex_lock(&pool);
	tpe__mutex_unlock(&pool);
	tpe__mutex_unlock(&future);
}

static void
test_debug_lock_order_reversed_dies(void **state)
{
	(void)state;
	/* One thread, two free locks: a release build runs it quietly. */
	assert_checked(order_reversed, true, DIES_IN("sync",
	    "check_order: lock order: taking a POOL lock while holding "
	    "a FUTURE lock"));
}

/* Two POOL locks: only fork's prepare may (under the FORK lock). */
static void
two_pools(void)
{
	struct tpe__mutex a, b;

	tpe__mutex_init_ranked(&a, TPE__RANK_POOL);
	tpe__mutex_init_ranked(&b, TPE__RANK_POOL);
	tpe__mutex_lock(&a);
	tpe__mutex_lock(&b);
	tpe__mutex_unlock(&b);
	tpe__mutex_unlock(&a);
}

static void
test_debug_lock_order_siblings_die(void **state)
{
	(void)state;
	assert_checked(two_pools, true, DIES_IN("sync",
	    "check_order: lock order: taking a second POOL lock"));
}

/* The order itself, FORK, POOLs under it, then SLOT and FUTURE, and a
 * trylock out of order (it cannot deadlock), pass in every build. */
static void
test_debug_lock_order_kept_passes(void **state)
{
	struct tpe__mutex fork_, pool1, pool2, slot, future, high;

	(void)state;
	tpe__mutex_init_ranked(&fork_, TPE__RANK_FORK);
	tpe__mutex_init_ranked(&pool1, TPE__RANK_POOL);
	tpe__mutex_init_ranked(&pool2, TPE__RANK_POOL);
	tpe__mutex_init_ranked(&slot, TPE__RANK_SLOT);
	tpe__mutex_init_ranked(&future, TPE__RANK_FUTURE);
	tpe__mutex_init_ranked(&high, TPE__RANK_COOP_WORKER);
	tpe__mutex_lock(&fork_);
	tpe__mutex_lock(&pool1);
	tpe__mutex_lock(&pool2);
	tpe__mutex_lock(&slot);
	tpe__mutex_lock(&future);
	tpe__mutex_unlock(&future);
	tpe__mutex_unlock(&slot);
	tpe__mutex_unlock(&pool2);
	tpe__mutex_unlock(&pool1);
	tpe__mutex_unlock(&fork_);
	tpe__mutex_lock(&high);
	assert_true(tpe__mutex_trylock(&pool1));
	tpe__mutex_unlock(&pool1);
	tpe__mutex_unlock(&high);
	/* Every count went back: the low lock may be taken again. */
	tpe__mutex_lock(&fork_);
	tpe__mutex_unlock(&fork_);
	tpe__mutex_destroy(&high);
	tpe__mutex_destroy(&future);
	tpe__mutex_destroy(&slot);
	tpe__mutex_destroy(&pool2);
	tpe__mutex_destroy(&pool1);
	tpe__mutex_destroy(&fork_);
}

/* ---- ownership across a condition wait ------------------------------- */

#ifdef TPE_DEBUG
struct waiter {
	struct tpe__mutex lock;
	pthread_cond_t cond;
	bool waiting, woken;           /* under lock */
	bool held_before, held_after;  /* the waiter's, read after join */
};

static void *
waiter_main(void *arg)
{
	struct waiter *w = arg;

	tpe__mutex_lock(&w->lock);
	w->held_before = tpe__mutex_held(&w->lock);
	w->waiting = true;
	tpe__cond_broadcast(&w->cond);
	while (!w->woken)
		tpe__cond_wait_until(&w->cond, &w->lock, -1);
	w->held_after = tpe__mutex_held(&w->lock);
	tpe__mutex_unlock(&w->lock);
	return NULL;
}
#endif

static void
test_debug_ownership_follows_cond_wait(void **state)
{
#ifdef TPE_DEBUG
	struct waiter w;
	pthread_t th;

	(void)state;
	memset(&w, 0, sizeof(w));
	tpe__mutex_init(&w.lock);
	tpe__cond_init(&w.cond);
	assert_false(tpe__mutex_held(&w.lock));
	assert_int_equal(pthread_create(&th, NULL, waiter_main, &w), 0);
	tpe__mutex_lock(&w.lock);
	while (!w.waiting)
		tpe__cond_wait_until(&w.cond, &w.lock, -1);
	/* The waiter gave the lock up in its wait: this thread holds it. */
	assert_true(tpe__mutex_held(&w.lock));
	w.woken = true;
	tpe__cond_broadcast(&w.cond);
	tpe__mutex_unlock(&w.lock);
	assert_false(tpe__mutex_held(&w.lock));
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_true(w.held_before);
	assert_true(w.held_after);
	tpe__cond_destroy(&w.cond);
	tpe__mutex_destroy(&w.lock);
#else
	(void)state;
	print_message("# SKIP: a release build (no --enable-debug) records no lock owner\n");
	skip();
#endif
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_debug_locked_function_needs_its_lock),
		cmocka_unit_test(test_debug_passed_lock_is_checked),
		cmocka_unit_test(test_debug_assert_names_file_and_line),
		cmocka_unit_test(test_debug_checks_compile_away_in_release),
		cmocka_unit_test(test_debug_relock_dies),
		cmocka_unit_test(test_debug_unlock_without_holding_dies),
		cmocka_unit_test(test_debug_ownership_follows_cond_wait),
		cmocka_unit_test(test_debug_lock_order_reversed_dies),
		cmocka_unit_test(test_debug_lock_order_siblings_die),
		cmocka_unit_test(test_debug_lock_order_kept_passes),
	};

	tu_time_bound(0);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
