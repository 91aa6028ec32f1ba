// SPDX-License-Identifier: MIT
// TpeBench.java - the Java peers of tpe-bench: java.util.concurrent's
// ThreadPoolExecutor and ForkJoinPool on the tiny and latency scenarios.
//
// Design notes
//   tpe-bench runs one JVM per measured run (RUNS = 1), interleaved with the
//   runs of the C peers:
//     java -cp DIR TpeBench POOL SCENARIO RUNS COUNT SUBMITTERS GAP_NS CAP_S WORKERS
//   POOL is "tpe" (ThreadPoolExecutor(w, w, LinkedBlockingQueue), core
//   threads prestarted: the pool libtpe clones) or "fjp" (ForkJoinPool(w),
//   execute() from outside the pool). SCENARIO is "tiny" or "latency".
//   The JVM does one unmeasured warm-up round (for the JIT), then RUNS
//   measured rounds, each on a fresh pool, and prints
//     version V
//     run V0 V1 ...      (one line per run: the scenario's metrics, in the
//                         order tpe-bench declares them)
//     note TEXT          (about the run before it)
//     error TEXT
//   Completion is counted as in tpe-bench: a no-op task bumps a LongAdder
//   (striped, no shared cache line in the common case) and the measuring
//   thread looks at the sum every millisecond.

import java.util.Arrays;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.ForkJoinPool;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.LongAdder;
import java.util.concurrent.locks.LockSupport;

public final class TpeBench {
    private static final LongAdder COUNT = new LongAdder();
    private static final Runnable NOOP = COUNT::increment;

    private static ExecutorService newPool(String kind, int workers) {
        if (kind.equals("tpe")) {
            ThreadPoolExecutor p = new ThreadPoolExecutor(workers, workers,
                    60, TimeUnit.SECONDS, new LinkedBlockingQueue<>());
            p.prestartAllCoreThreads();
            return p;
        }
        if (kind.equals("fjp"))
            return new ForkJoinPool(workers);
        throw new IllegalArgumentException("unknown pool " + kind);
    }

    private static void close(ExecutorService p) throws InterruptedException {
        p.shutdown();
        if (!p.awaitTermination(30, TimeUnit.SECONDS))
            throw new IllegalStateException("the pool did not terminate");
    }

    private static void waitCount(long target) throws InterruptedException {
        long deadline = System.nanoTime() + 60_000_000_000L;
        while (COUNT.sum() < target) {
            if (System.nanoTime() > deadline)
                throw new IllegalStateException("tasks did not all run in 60 s");
            Thread.sleep(1);
        }
    }

    // tiny: COUNT no-op tasks from SUBMITTERS threads; ns/task, Mtasks/s.
    private static String tiny(String kind, long count, int subs, int capS,
            int workers) throws Exception {
        ExecutorService pool = newPool(kind, workers);
        long warm = COUNT.sum();
        for (int i = 0; i < 10_000; i++)
            pool.execute(NOOP);
        waitCount(warm + 10_000);
        CyclicBarrier start = new CyclicBarrier(subs + 1);
        long[] done = new long[subs];
        Thread[] t = new Thread[subs];
        for (int s = 0; s < subs; s++) {
            final int me = s;
            final long quota = count / subs + (s < count % subs ? 1 : 0);
            t[s] = new Thread(() -> {
                long i = 0;
                try {
                    start.await();
                    long stop = System.nanoTime() + capS * 1_000_000_000L;
                    for (; i < quota; i++) {
                        if ((i & 1023) == 0 && System.nanoTime() > stop)
                            break;
                        pool.execute(NOOP);
                    }
                } catch (Exception e) {
                    throw new RuntimeException(e);
                } finally {
                    done[me] = i;
                }
            });
            t[s].start();
        }
        long base = COUNT.sum();
        start.await();
        long t0 = System.nanoTime();
        long total = 0;
        for (int s = 0; s < subs; s++) {
            t[s].join();
            total += done[s];
        }
        waitCount(base + total);
        long t1 = System.nanoTime();
        close(pool);
        double ns = (double) (t1 - t0) / total;
        String r = String.format("run %.6g %.6g", ns, total * 1e3 / (t1 - t0));
        if (total < count)
            r += String.format("%nnote capped at %d s: %d of %d tasks", capS,
                    total, count);
        return r;
    }

    // latency: submit-to-start of one task at a time on an idle pool.
    private static final class Sample implements Runnable {
        volatile long start;
        volatile boolean done;
        volatile Thread waiter;

        public void run() {
            start = System.nanoTime();
            done = true;
            LockSupport.unpark(waiter);
        }
    }

    private static long latOne(ExecutorService pool, Sample s, long gapNs) {
        LockSupport.parkNanos(gapNs);
        s.done = false;
        s.waiter = Thread.currentThread();
        long t0 = System.nanoTime();
        pool.execute(s);
        long deadline = t0 + 10_000_000_000L;
        while (!s.done) {
            LockSupport.parkNanos(1_000_000);
            if (System.nanoTime() > deadline)
                throw new IllegalStateException("a task did not start in 10 s");
        }
        return s.start - t0;
    }

    private static String latency(String kind, int samples, long gapNs,
            int workers) throws Exception {
        ExecutorService pool = newPool(kind, workers);
        Sample s = new Sample();
        for (int i = 0; i < 200; i++)
            latOne(pool, s, gapNs);
        long[] lat = new long[samples];
        for (int i = 0; i < samples; i++)
            lat[i] = latOne(pool, s, gapNs);
        close(pool);
        Arrays.sort(lat);
        return String.format("run %.6g %.6g %.6g", lat[samples / 2] / 1e3,
                lat[samples * 99 / 100] / 1e3, lat[samples * 999 / 1000] / 1e3);
    }

    private static String round(String kind, String scenario, long count,
            int subs, long gap, int capS, int workers) throws Exception {
        if (scenario.equals("tiny"))
            return tiny(kind, count, subs, capS, workers);
        if (scenario.equals("latency"))
            return latency(kind, (int) count, gap, workers);
        throw new IllegalArgumentException("unknown scenario " + scenario);
    }

    public static void main(String[] a) {
        try {
            if (a.length != 8)
                throw new IllegalArgumentException("usage: TpeBench POOL "
                        + "SCENARIO RUNS COUNT SUBMITTERS GAP_NS CAP_S WORKERS");
            String kind = a[0], scenario = a[1];
            int runs = Integer.parseInt(a[2]);
            long count = Long.parseLong(a[3]);
            int subs = Integer.parseInt(a[4]);
            long gap = Long.parseLong(a[5]);
            int capS = Integer.parseInt(a[6]);
            int workers = Integer.parseInt(a[7]);
            System.out.println("version " + System.getProperty("java.vm.name")
                    + " " 
                    + System.getProperty("java.version"));
            // Warm-up round for the JIT, a tenth of the work, not reported.
            round(kind, scenario, Math.max(count / 10, 1000), subs, gap,
                    capS, workers);
            for (int r = 0; r < runs; r++) {
                System.out.println(round(kind, scenario, count, subs, gap,
                        capS, workers));
                System.out.flush();
            }
        } catch (Throwable e) {
            System.out.println("error " + e);
            System.exit(1);
        }
    }
}
