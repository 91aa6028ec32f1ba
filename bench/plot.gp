# SPDX-License-Identifier: MIT
# plot.gp - draws tpe-bench's results.csv as one PNG of four panels.
#
#   gnuplot -e "csv='bench/results.csv'; png='bench/results.png'" bench/plot.gp
#
# Each bar is a median; its whisker spans the smallest and the largest run.
# The CSV is in long form (scenario,peer,metric,unit,median,min,max,...);
# awk turns each panel's rows into one line per peer, in the CSV's order,
# with NaN where a peer has no figure (skipped, failed, or not measured).
# The `inline` row (no pool: the machine's own loop, for its spread) is
# left out: at 10x the fastest pool it would flatten every bar.

if (!exists("csv")) csv = "bench/results.csv"
if (!exists("png")) png = "bench/results.png"

# One line per peer: "peer med min max [med min max]" for metric m of
# scenario s1 (and of s2 in a second column group, metric m2).
rows(s1, m1, s2, m2) = sprintf("< awk -F, -v s1='%s' -v m1='%s' -v s2='%s' -v m2='%s' '\
NR > 1 && $2 != \"inline\" && (($1 == s1 && $3 == m1) || ($1 == s2 && $3 == m2)) {\
  if (!($2 in seen)) { seen[$2] = 1; order[n++] = $2 }\
  k = ($1 == s1 && $3 == m1) ? 1 : 2; v[$2, k] = $5 \" \" $6 \" \" $7 }\
END { for (i = 0; i < n; i++) { p = order[i];\
  a = ((p, 1) in v) ? v[p, 1] : \"NaN NaN NaN\";\
  b = ((p, 2) in v) ? v[p, 2] : \"NaN NaN NaN\"; print p, a, b } }' %s", \
  s1, m1, s2, m2, csv)

set terminal pngcairo size 1400,1000 font "sans,10"
set output png
set datafile missing "NaN"
set style data histogram
set style histogram errorbars gap 1 lw 1
set style fill solid 0.7 border -1
set boxwidth 0.9
set grid ytics
set xtics rotate by -30 noenhanced
set key top right noenhanced
set yrange [0:*]
set offsets 0, 0, graph 0.15, 0   # room above the tallest bar for the key

set multiplot layout 2,2 title "tpe-bench: libtpe and the pools users pick instead (median, whiskers min-max)"

set title "tiny: no-op tasks, 2 workers (higher is better)"
set ylabel "million tasks / s"
plot rows("tiny-1", "Mtasks/s", "tiny-2", "Mtasks/s") \
	using 2:3:4:xtic(1) title "1 submitter" lc rgb "#4477aa", \
	'' using 5:6:7 title "2 submitters" lc rgb "#66ccee"

set title "latency: submit-to-start on an idle pool (lower is better)"
set ylabel "microseconds"
set logscale y
set yrange [*:*]
plot rows("latency", "p50 us", "latency", "p99 us") \
	using 2:3:4:xtic(1) title "p50" lc rgb "#228833", \
	'' using 5:6:7 title "p99" lc rgb "#ccbb44"
unset logscale y
set yrange [0:*]

set title "memory per queued task (lower is better)"
set ylabel "bytes / task"
plot rows("memory-task", "heap B/task", "memory-task", "RSS B/task") \
	using 2:3:4:xtic(1) title "heap" lc rgb "#ee6677", \
	'' using 5:6:7 title "RSS" lc rgb "#aa3377", \
	64 with lines dt 2 lc rgb "black" title "64 B target"

set title "memory per idle thread (lower is better)"
set ylabel "kilobytes / thread"
plot rows("memory-thread", "heap B/thread", "memory-thread", "RSS B/thread") \
	using ($2/1024):($3/1024):($4/1024):xtic(1) title "heap" lc rgb "#bbbbbb", \
	'' using ($5/1024):($6/1024):($7/1024) title "RSS" lc rgb "#777777"

unset multiplot
