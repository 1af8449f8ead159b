#!/usr/bin/env python3
"""Turns Benchmarks/out/results.tsv into the RESULTS.md table (written to stdout).

Usage: report.py RESULTS_TSV META_TXT LOAD_BEFORE LOAD_AFTER [LOAD_DURING]
Each TSV line: scenario, metric, server (C | RS | HB), round, value. A figure is the mean over
rounds; ratios are ReactorServer's mean divided by the other server's mean, followed by the range
of the ratios within each round (the servers of one round run minutes apart at most, so a round's
ratio is paired against the same machine load)."""
import sys
from collections import defaultdict

results_path, meta_path, before_path, after_path = sys.argv[1:5]
during_path = sys.argv[5] if len(sys.argv) > 5 else None
values = defaultdict(list)
by_round = defaultdict(dict)  # (metric, server) -> {round: value}
for line in open(results_path):
    parts = line.rstrip("\n").split("\t")
    if len(parts) != 5 or parts[4] == "":
        continue
    scenario, metric, server, round_, value = parts
    try:
        values[(metric, server)].append(float(value))
        by_round[(metric, server)][round_] = float(value)
    except ValueError:
        pass

meta = dict(line.rstrip("\n").split("=", 1) for line in open(meta_path) if "=" in line)


def mean(metric, server):
    v = values.get((metric, server))
    return sum(v) / len(v) if v else None


def span(v, scale=1):
    """ "lowest–highest" of two or more values, else nothing."""
    if not v or len(v) < 2:
        return ""
    return f"{fmt(min(v) * scale)}–{fmt(max(v) * scale)}"


def with_span(text, v, scale=1):
    """`text`, then the span of `v` in brackets when there is one."""
    r = span(v, scale)
    return f"{text} ({r})" if r else text


def fmt(x, unit=""):
    if x is None:
        return "—"
    if abs(x) >= 1000:
        return f"{x:,.0f}{unit}"
    if abs(x) >= 100:
        return f"{x:.0f}{unit}"
    if abs(x) >= 10:
        return f"{x:.1f}{unit}"
    return f"{x:.2f}{unit}"


def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


def round_ratios(metric, server, other, other_metric=None):
    """The ratio server ÷ other within each round both were measured in."""
    mine, theirs = by_round.get((metric, server), {}), by_round.get((other_metric or metric, other), {})
    return [mine[r] / theirs[r] for r in sorted(mine) if r in theirs and theirs[r] != 0]


def ratio_cell(metric, other):
    """RS's mean ÷ the other's mean, then the range of the per-round ratios."""
    r = ratio(mean(metric, "RS"), mean(metric, other))
    if r is None:
        return "—"
    return with_span(fmt(r), round_ratios(metric, "RS", other))


# (scenario, label, metric, unit, scale, target text, check(rs, c, hb) -> bool | None)
def ge(r, limit):
    return None if r is None else r >= limit


ROWS = [
    ("1", "POST action, 64 conns", "post_rps_c64", "req/s", 1,
     "≥ 0.8× C, ≥ 3× HB", lambda rs, c, hb: both(ge(ratio(rs, c), 0.8), ge(ratio(rs, hb), 3))),
    ("1", "  p50 latency", "post_p50_us_c64", "ms", 1e-3, "", None),
    ("1", "  p99 latency", "post_p99_us_c64", "ms", 1e-3, "", None),
    ("1", "  server CPU per request", "post_cpu_us_c64", "µs", 1, "", None),
    ("1", "POST action, 256 conns", "post_rps_c256", "req/s", 1,
     "≥ 0.8× C, ≥ 3× HB", lambda rs, c, hb: both(ge(ratio(rs, c), 0.8), ge(ratio(rs, hb), 3))),
    ("1", "  p50 latency", "post_p50_us_c256", "ms", 1e-3, "", None),
    ("1", "  p99 latency", "post_p99_us_c256", "ms", 1e-3, "", None),
    ("1", "  server CPU per request", "post_cpu_us_c256", "µs", 1, "", None),
    ("1", "POST action, 64 conns, 2,000 idle keep-alive connections open", "post_rps_idle", "req/s", 1, "", None),
    ("1", "  server CPU per request", "post_cpu_us_idle", "µs", 1, "", None),
    ("1", "RSS after scenarios 1–2", "rss_after_mib", "MiB", 1, "", None),
    ("2", "GET state, 64 conns", "get_rps_c64", "req/s", 1, "≥ 0.85× C",
     lambda rs, c, hb: ge(ratio(rs, c), 0.85)),
    ("2", "  server CPU per request", "get_cpu_us_c64", "µs", 1, "", None),
    ("2", "GET state, 256 conns", "get_rps_c256", "req/s", 1, "≥ 0.85× C",
     lambda rs, c, hb: ge(ratio(rs, c), 0.85)),
    ("2", "  server CPU per request", "get_cpu_us_c256", "µs", 1, "", None),
    ("3", "POST→SSE p50, 10k actions/s, 100 counters", "sse_p50_us", "ms", 1e-3, "", None),
    ("3", "POST→SSE p99", "sse_p99_us", "ms", 1e-3, "< 2 ms",
     lambda rs, c, hb: None if rs is None else rs < 2000),
    ("3", "POST→SSE max", "sse_max_us", "ms", 1e-3, "", None),
    ("3", "  actions/s achieved", "sse_rate", "/s", 1, "", None),
    ("3", "  sends > 1 ms behind schedule", "sse_late", "of all", 1, "", None),
    ("3", "  server CPU per action", "sse_cpu_us", "µs", 1, "", None),
    ("4", "fan-out 1,000 streams: delivery p50", "fan1000_p50_us", "ms", 1e-3, "", None),
    ("4", "  delivery p99", "fan1000_p99_us", "ms", 1e-3, "", None),
    ("4", "  server RSS (peak)", "fan1000_rss_mib", "MiB", 1, "", None),
    ("4", "  server CPU", "fan1000_cpu_pct", "% of a core", 1, "", None),
    ("4", "fan-out 10,000 streams: delivery p50", "fan10000_p50_us", "ms", 1e-3, "", None),
    ("4", "  delivery p99", "fan10000_p99_us", "ms", 1e-3, "", None),
    ("4", "  server RSS (peak)", "fan10000_rss_mib", "MiB", 1, "< 160 MiB",
     lambda rs, c, hb: None if rs is None else rs < 160),
    ("4", "  server CPU", "fan10000_cpu_pct", "% of a core", 1, "", None),
    ("5", "RSS per instance", "instance_bytes", "bytes", 1, "", None),
    ("5", "instances created per second", "create_per_s", "/s", 1, "", None),
    ("5", "POST action on one instance, 64 conns", "one_rps", "req/s", 1, "", None),
    ("5", "  server CPU per request", "one_cpu_us", "µs", 1, "", None),
    ("5", "POST action spread over 100 of them", "few_rps", "req/s", 1, "", None),
    ("5", "  server CPU per request", "few_cpu_us", "µs", 1, "", None),
    ("5", "POST action spread over 10,000 of them", "mid_rps", "req/s", 1, "", None),
    ("5", "  server CPU per request", "mid_cpu_us", "µs", 1, "", None),
    ("5", "POST action spread over all instances", "spread_rps", "req/s", 1, "flat: spread ≥ 0.9× one and 100 of them",
     None),
    ("5", "  server CPU per request", "spread_cpu_us", "µs", 1, "", None),
    ("6", "cold start to first 200 (median)", "coldstart_median_ms", "ms", 1, "", None),
]


def both(a, b):
    if a is None or b is None:
        return None
    return a and b


out = []
out.append("# Benchmark results\n")
out.append(f"Written by `Benchmarks/run` on {meta.get('date', '?')}, {meta.get('mode', '')}.\n")
out.append(f"- Machine: {meta.get('nproc', '?')} cores ({meta.get('cpu', '?')}), {meta.get('memory', '?')} memory, "
           f"Linux {meta.get('kernel', '?')}; load generator on the same cores, loopback only.")
out.append(f"- ReactorServer commit measured: {meta.get('commit', '?')}.")
out.append(f"- Versions: {meta.get('swift', '?')}; libmicrohttpd {meta.get('libmicrohttpd', '?')}; "
           f"{meta.get('wrk', '?')}; Hummingbird {meta.get('hummingbird', '?')}.")
out.append("- RS = ReactorServer (`reactor-server --counter-delay-ms 0`), C = raw libmicrohttpd answering a fixed "
           "`{\"value\":1}` (Benchmarks/microhttp/c-server.c), HB = Hummingbird 2 serving the same reactors "
           "(Benchmarks/hb-reactors). Each figure is the mean over the rounds (range in brackets); the servers "
           "run alternately within a round. Ratios are RS's mean ÷ the other's (above 1: RS has more of it — "
           "good for throughput, bad for latency, memory and time), with the range of the ratios taken within "
           "each round in brackets: a target whose range straddles its line is met in some rounds and missed "
           "in others. \"met\" judges the mean.\n")
out.append("| # | measurement | unit | RS | C | HB | RS/C | RS/HB | target | met |")
out.append("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | --- | --- |")
for scenario, label, metric, unit, scale, target, check in ROWS:
    rs, c, hb = (mean(metric, s) for s in ("RS", "C", "HB"))
    if rs is None and c is None and hb is None:
        continue
    cells = []
    for s, v in (("RS", rs), ("C", c), ("HB", hb)):
        if v is None:
            cells.append("—")
            continue
        cells.append(with_span(fmt(v * scale), values.get((metric, s)), scale))
    met = ""
    if metric == "spread_rps":
        one = mean("one_rps", "RS")
        r = ratio(rs, one)
        cost = ratio(mean("spread_cpu_us", "RS"), mean("one_cpu_us", "RS"))
        cost_text = "" if cost is None else f"; RS CPU per request {cost:.2f}× one's"
        few = ratio(rs, mean("few_rps", "RS"))
        few_cost = ratio(mean("spread_cpu_us", "RS"), mean("few_cpu_us", "RS"))
        few_text = "" if few is None or few_cost is None else \
            f"; against 100 of them: RS {few:.2f}×, CPU per request {few_cost:.2f}×"
        # Both runs carry the same traffic; a slow "one" round alone must not pass the target.
        flat = None if r is None else (r >= 0.9 and (few is None or few >= 0.9))
        # Ten times the instances of a working set already past the caches: whether the cost
        # still grows with their number, apart from leaving the caches.
        mid = ratio(rs, mean("mid_rps", "RS"))
        mid_cost = ratio(mean("spread_cpu_us", "RS"), mean("mid_cpu_us", "RS"))
        mid_text = "" if mid is None or mid_cost is None else \
            f"; against 10,000 of them: RS {mid:.2f}×, CPU per request {mid_cost:.2f}×"
        rounds = span(round_ratios("spread_rps", "RS", "RS", "few_rps"))
        rounds_text = f"; rounds against 100 of them {rounds}×" if rounds else ""
        # C answers the same requests with a fixed body: what is left of its change is the load
        # generator's own cost of drawing from many ids, which RS's ratio includes too.
        c_few = ratio(c, mean("few_rps", "C"))
        c_text = "" if c_few is None or few is None else \
            (f"; C, same requests, against 100 of them: {c_few:.2f}× (rounds "
             f"{span(round_ratios('spread_rps', 'C', 'C', 'few_rps')) or '—'}), RS's ratio ÷ C's {few / c_few:.2f}×")
        met = "" if r is None else (f"{'yes' if flat else '**no**'} (RS {r:.2f}×; HB "
                                    f"{fmt(ratio(hb, mean('one_rps', 'HB')))}×{cost_text}{few_text}{rounds_text}{mid_text}{c_text})")
    elif check is not None:
        ok = check(rs, c, hb)
        met = "" if ok is None else ("yes" if ok else "**no**")
    out.append(f"| {scenario} | {label} | {unit} | {cells[0]} | {cells[1]} | {cells[2]} | "
               f"{ratio_cell(metric, 'C') if c is not None else '—'} | {ratio_cell(metric, 'HB') if hb is not None else '—'} | "
               f"{target} | {met} |")

out.append("\n## Machine load around the run\n")
out.append("Load average and the busiest processes over one second (`top`), just before and just after the run:\n")
out.append("```")
out.extend(open(before_path).read().rstrip().splitlines())
out.append("---")
out.extend(open(after_path).read().rstrip().splitlines())
out.append("```")
if during_path:
    out.append("\nDuring the run (load average 1/5/15 min, then processes using ≥ 5 % of a core over 0.5 s, "
               "including this run's own servers and load generator):\n")
    out.append("```")
    out.extend(open(during_path).read().rstrip().splitlines())
    out.append("```")
out.append("\nRaw per-round figures: `Benchmarks/out/results.tsv` after a run (not committed).")
print("\n".join(out))
