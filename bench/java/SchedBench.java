// SPDX-License-Identifier: MIT
//
// SchedBench.java - the Java peer of bench/sched-bench.c:
// java.util.concurrent.ScheduledThreadPoolExecutor(2) with
// setRemoveOnCancelPolicy(true). sched-bench runs it as a child process and
// reads its standard output:
//
//   java -cp DIR SchedBench cost TIMERS PAIRS RUNS
//     version V
//     run FILL_NS PAIR_NS        (one line per run: ns per schedule while
//                                 filling TIMERS pending timers, ns per
//                                 schedule + cancel(false) pair with them
//                                 pending)
//   java -cp DIR SchedBench late SAMPLES RUNS
//     version V
//     run P50_US P99_US          (lateness of SAMPLES one-shots with
//                                 random delays of 1 to 200 ms)
//   error TEXT                   on failure
//
// Delays are whole milliseconds drawn like sched-bench's (their own
// generator: the figures are statistics, not a replay).
import java.util.Arrays;
import java.util.SplittableRandom;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;

public final class SchedBench {
	private static final long HOUR_MS = 3600L * 1000;
	private static final long MIN_FAR_MS = 60L * 1000;

	private static ScheduledThreadPoolExecutor pool() {
		ScheduledThreadPoolExecutor p = new ScheduledThreadPoolExecutor(2);
		p.setRemoveOnCancelPolicy(true);
		return p;
	}

	private static long far(SplittableRandom r) {
		return MIN_FAR_MS + r.nextLong(HOUR_MS - MIN_FAR_MS);
	}

	private static void cost(int timers, int pairs, int runs)
	    throws Exception {
		Runnable nop = () -> { };
		SplittableRandom r = new SplittableRandom(12345);

		for (int run = 0; run < runs; run++) {
			ScheduledThreadPoolExecutor p = pool();
			ScheduledFuture<?>[] f = new ScheduledFuture<?>[timers];
			long t0 = System.nanoTime();
			for (int i = 0; i < timers; i++)
				f[i] = p.schedule(nop, far(r), TimeUnit.MILLISECONDS);
			long t1 = System.nanoTime();
			for (int i = 0; i < pairs; i++) {
				ScheduledFuture<?> g = p.schedule(nop, far(r),
				    TimeUnit.MILLISECONDS);
				g.cancel(false);
			}
			long t2 = System.nanoTime();
			System.out.printf("run %.1f %.1f%n",
			    (double)(t1 - t0) / timers,
			    (double)(t2 - t1) / pairs);
			System.out.flush();
			p.shutdownNow();
			p.awaitTermination(60, TimeUnit.SECONDS);
			f = null;
		}
	}

	private static void late(int samples, int runs) throws Exception {
		SplittableRandom r = new SplittableRandom(54321);

		for (int run = 0; run < runs; run++) {
			ScheduledThreadPoolExecutor p = pool();
			long[] late = new long[samples];
			CountDownLatch done = new CountDownLatch(samples);
			for (int i = 0; i < samples; i++) {
				final int k = i;
				long d = 1 + r.nextLong(200);
				final long due = System.nanoTime() + d * 1000000;
				p.schedule(() -> {
					late[k] = System.nanoTime() - due;
					done.countDown();
				}, d, TimeUnit.MILLISECONDS);
			}
			if (!done.await(60, TimeUnit.SECONDS)) {
				System.out.println("error timers not done in 60 s");
				return;
			}
			p.shutdown();
			Arrays.sort(late);
			System.out.printf("run %.1f %.1f%n",
			    late[samples / 2] / 1000.0,
			    late[(int)((long)samples * 99 / 100)] / 1000.0);
			System.out.flush();
			Thread.sleep(50); /* idle between runs */
		}
	}

	public static void main(String[] a) {
		try {
			System.out.println("version "
			    + System.getProperty("java.version"));
			if (a.length == 4 && a[0].equals("cost"))
				cost(Integer.parseInt(a[1]),
				    Integer.parseInt(a[2]),
				    Integer.parseInt(a[3]));
			else if (a.length == 3 && a[0].equals("late"))
				late(Integer.parseInt(a[1]),
				    Integer.parseInt(a[2]));
			else
				System.out.println("error usage: SchedBench "
				    + "cost TIMERS PAIRS RUNS | late SAMPLES RUNS");
		} catch (Throwable t) {
			System.out.println("error " + t);
		}
		System.out.flush();
		System.exit(0);
	}
}
