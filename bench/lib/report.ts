import type { ScenarioResult, Side } from './scenario-kit.js';

interface Results {
  source_changed_during_run: boolean;
  mode: string;
  started_at: string;
  duration_s: number;
  machine: { nproc: number; cpu_model: string; node: string; redis_version: string | null; git_commit: string; src_dirty: boolean; loadavg: number[] };
  pinning: string;
  code: string;
  scenarios: ScenarioResult[];
  failures: { id: number; error: string }[];
  all_pass: boolean;
}

/** The stdout report: one row per scenario (subject, baseline, ratio), then every target with its verdict. */
export function formatTable(results: Results): string {
  const m = results.machine;
  const lines: string[] = [];
  lines.push('');
  lines.push(
    `rl bench — ${results.mode} run ${results.started_at}, ${results.duration_s} s — ${m.nproc} cores ${m.cpu_model}, node ${m.node}, ` +
      `redis ${m.redis_version ?? '-'}, commit ${m.git_commit}${m.src_dirty ? ' (src/ modified)' : ''}`,
  );
  if (results.source_changed_during_run) lines.push('WARNING: src/ changed while this run was in progress; the figures mix versions of the code');
  lines.push(results.pinning);
  lines.push(`code under test: ${results.code}`);
  lines.push(`load average at start (1/5/15 min): ${m.loadavg.join(' / ')} — anything above ~0.5 means other work shared the cores`);
  lines.push('');
  const rows: string[][] = [['#', 'scenario', 'subject', 'thrpt/s', 'p50 ms', 'p99 ms', 'baseline', 'thrpt/s', 'p50 ms', 'p99 ms', 'ratio']];
  for (const s of results.scenarios) {
    rows.push([
      String(s.id),
      s.name,
      short(s.subject),
      num(s.subject.throughput_per_s),
      num(s.subject.p50_ms),
      num(s.subject.p99_ms),
      short(s.baseline),
      num(s.baseline.throughput_per_s),
      num(s.baseline.p50_ms),
      num(s.baseline.p99_ms),
      num(s.ratio),
    ]);
  }
  lines.push(...table(rows));
  lines.push('');
  const targets: string[][] = [['#', 'target', 'measured', 'limit', 'result']];
  for (const s of results.scenarios) {
    for (const c of s.checks) {
      targets.push([String(s.id), c.target, `${num(c.value)}${c.unit ? ' ' + c.unit : ''}`, `${c.op} ${c.limit}${c.unit ? ' ' + c.unit : ''}`, c.pass ? 'PASS' : 'FAIL']);
    }
  }
  lines.push(...table(targets));
  lines.push('');
  for (const s of results.scenarios) {
    lines.push(`[${s.id}] ${s.name}: ratio = ${s.ratio_meaning}`);
    for (const extra of extras(s)) lines.push(`    ${extra}`);
    const load = s.details.loadavg_1m as { before: number; after: number } | undefined;
    if (load) lines.push(`    machine load average (1 min) ${load.before} before, ${load.after} after`);
    for (const note of s.notes) lines.push(`    note: ${note}`);
  }
  for (const f of results.failures) lines.push(`[${f.id}] FAILED: ${f.error.split('\n')[0]}`);
  lines.push('');
  lines.push(results.all_pass ? 'all targets hold' : 'some targets do not hold (see FAIL above)');
  return lines.join('\n');
}

function extras(s: ScenarioResult): string[] {
  const out: string[] = [];
  const cpu = (side: Side) =>
    typeof side.server_cpu_us_per_request === 'number'
      ? `${side.name}: server CPU ${side.server_cpu_pct}% of a core, ${side.server_cpu_us_per_request} µs CPU/request, load generator ${side.loadgen_cpu_pct}%` +
        (Array.isArray(side.rounds_throughput_per_s) && side.rounds_throughput_per_s.length > 1
          ? `; rounds ${side.rounds_throughput_per_s.map((v: number) => num(v)).join(' / ')} req/s`
          : '')
      : undefined;
  for (const side of [s.subject, s.baseline]) {
    const line = cpu(side);
    if (line) out.push(line);
  }
  if (typeof s.details.cpu_capacity_ratio === 'number') {
    out.push(`server CPU per request, baseline / subject: ${s.details.cpu_capacity_ratio} (the throughput ratio if both servers saturated their core)`);
  }
  for (const key of ['breakdown_koa_only', 'breakdown_bare_with_headers']) {
    const breakdown = s.details[key] as (Side & { ratio_to_bare: number }) | undefined;
    if (!breakdown) continue;
    out.push(
      `breakdown: ${breakdown.name}: ${num(breakdown.throughput_per_s)} req/s (${breakdown.ratio_to_bare} of bare), ` +
        `${breakdown.server_cpu_us_per_request} µs CPU/request, p50 ${breakdown.p50_ms} ms, p99 ${breakdown.p99_ms} ms`,
    );
  }
  if (s.key === 'http_memory') {
    const half = s.details.half_rate as { subject: Side; open_loop: { subject: Side; baseline: Side } | null } | undefined;
    out.push(
      `at ${s.subject.half_rate_rps} req/s (autocannon overallRate): rl p50 ${s.subject.half_rate_p50_ms} ms p99 ${s.subject.half_rate_p99_ms} ms` +
        (half ? ` (server CPU ${half.subject.server_cpu_pct}%)` : '') +
        `; bare p50 ${s.baseline.half_rate_p50_ms} ms p99 ${s.baseline.half_rate_p99_ms} ms`,
    );
    if (half?.open_loop) {
      const o = half.open_loop;
      out.push(
        `at the same rate, open loop evenly paced: rl p50 ${o.subject.p50_ms} ms p99 ${o.subject.p99_ms} ms (server CPU ${o.subject.server_cpu_pct}%, ` +
          `${o.subject.server_cpu_us_per_request} µs/request); bare p50 ${o.baseline.p50_ms} ms p99 ${o.baseline.p99_ms} ms (server CPU ${o.baseline.server_cpu_pct}%)`,
      );
    }
  }
  if (s.key === 'http_redis') {
    for (const side of [s.subject, s.baseline]) {
      const r = side.redis as { client_commands_per_decision: number; scripts_per_decision: number; all_commands_per_decision_incl_in_script: number };
      out.push(`${side.name}: ${r.client_commands_per_decision} client commands/decision (${r.scripts_per_decision} scripts), ${r.all_commands_per_decision_incl_in_script} incl. commands run inside scripts`);
    }
  }
  if (s.key === 'engine_memory' || s.key === 'policy_scaling') {
    const sides = s.key === 'policy_scaling' ? (s.details.by_count as Side[]) : [s.subject, s.baseline, s.details.without_recorder as Side | undefined].filter((x): x is Side => x !== undefined);
    for (const side of sides) {
      out.push(
        `${side.name}: ${side.ns_per_decision} ns/decision (median round ${side.median_ns_per_decision}), GC ${side.gc_pct}% of the time, heap ${side.heap_used_mib} MiB` +
          (side.match_ns !== undefined
            ? `, live heap after build ${side.live_heap_mib_after_build} MiB, match alone ${side.match_ns} ns, matcher build ${side.matcher_build_ms} ms`
            : ''),
      );
    }
  }
  if (s.key === 'memory_per_key') {
    for (const side of [s.subject, s.baseline]) {
      out.push(
        `${side.name}: ${side.rss_bytes_per_key} B RSS/key (${side.heap_bytes_per_key} B heap/key); RSS ${side.rss_start_mib} → ${side.rss_full_mib}` +
          (side.rss_after_expiry_mib !== null ? ` → ${side.rss_after_expiry_mib} MiB after expiry (heap ${side.heap_start_mib} → ${side.heap_full_mib} → ${side.heap_after_expiry_mib} MiB)` : ' MiB'),
      );
    }
    if (s.subject.sweep_ms !== undefined) {
      out.push(`sweeper removed every key in ${s.subject.sweep_ms} ms; event-loop delay meanwhile p99 ${s.subject.sweep_loop_delay_p99_ms} ms, max ${s.subject.sweep_loop_delay_max_ms} ms`);
    }
  }
  return out;
}

function short(side: Side): string {
  const name = side.name;
  return name.length > 44 ? name.slice(0, 43) + '…' : name;
}

function num(value: number | null | undefined): string {
  if (value === null || value === undefined || Number.isNaN(value)) return '-';
  if (Math.abs(value) >= 1000) return Math.round(value).toLocaleString('en-US');
  return String(value);
}

function table(rows: string[][]): string[] {
  const widths = rows[0].map((_, c) => Math.max(...rows.map((r) => r[c].length)));
  return rows.map((r, i) => {
    const line = r.map((cell, c) => (c >= 3 && /^[-\d.,]+$/.test(cell) ? cell.padStart(widths[c]) : cell.padEnd(widths[c]))).join('  ');
    return i === 0 ? `${line}\n${widths.map((w) => '-'.repeat(w)).join('  ')}` : line;
  });
}
