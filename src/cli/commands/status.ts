import type { Command } from 'commander';
import { AdminApiError, type ProbeResult } from '@rl/client';
import { adminClient, type GlobalOptions } from '../connection.js';
import { EXIT_ERROR } from '../exit-codes.js';
import { printJson, printLines } from '../output.js';
import type { LeaseTotals, RegionStatus, ServerInfoBody } from '../../schema/server-info.js';
import { shareText } from '../share-text.js';

type MasterHealth = NonNullable<ServerInfoBody['counter_store_masters']>[number];

/**
 * `rl status`: liveness (/healthz), readiness (/readyz), and the server's version and modes
 * (/rl/v1/info: counters memory|redis, policy store, auth, TLS; in Redis mode each master's breaker and
 * calls in flight and the lease totals; in region mode the region and the global store's state). Exit 0
 * only when live and ready.
 * Info needs a credential when auth is on; without one the probes still answer and info says why not.
 */
export function registerStatusCommand(program: Command): void {
  program
    .command('status')
    .description('health, readiness, version and counters mode of the server')
    .action(async (_o: unknown, cmd: Command) => {
      const g = cmd.optsWithGlobals<GlobalOptions>();
      const client = adminClient(g);
      const [health, readiness] = await Promise.all([client.health(), client.readiness()]);
      let info: Record<string, unknown> | undefined;
      let infoError: string | undefined;
      try {
        info = await client.info();
      } catch (error) {
        if (!(error instanceof AdminApiError)) throw error;
        infoError = `${error.status} ${error.serverMessage}`;
      }
      const ok = health.ok && readiness.ok;
      if (g.json) {
        printJson({ url: client.url, ok, health: probe(health), readiness: probe(readiness), ...(info ? { info } : { info_error: infoError }) });
      } else {
        const lines = [`url        ${client.url}`, `health     ${probeText(health)}`, `readiness  ${probeText(readiness)}`];
        if (info) {
          lines.push(`version    ${String(info.version)}${info.node ? ` (node ${String(info.node)})` : ''}`);
          lines.push(`counters   ${String(info.counters)}`);
          lines.push(`policies   ${String(info.policy_store)} store`);
          lines.push(`auth       ${String(info.auth)}${info.tls ? ', TLS' : ''}`);
          for (const master of mastersOf(info)) lines.push(`master     ${masterText(master)}`);
          const region = info.region as RegionStatus | undefined;
          if (region) {
            lines.push(`region     ${region.name}`);
            lines.push(`global     ${region.global_store.state.replace('_', ' ')}`);
            for (const master of region.global_store.masters) lines.push(`  master   ${masterText(master)}`);
            // Taken/guaranteed units of the window per region (budget_shares).
            for (const use of region.shares ?? []) lines.push(`shares     ${shareText(use)}`);
          }
          const leases = info.leases as LeaseTotals | undefined;
          if (leases) lines.push(`leases     ${leasesText(leases)}`);
        } else {
          lines.push(`info       unavailable (${infoError})`);
        }
        printLines(lines);
      }
      if (!ok) process.exitCode = EXIT_ERROR;
    });
}

function masterText(master: MasterHealth): string {
  return `${master.master} breaker ${master.breaker}, ${master.consecutive_failures} failures in a row, ${master.pending_calls} calls pending`;
}

/** "3 refills, 37 units returned, 7 lapsed (window ended 5, hold expired 2), 1 decision waited". */
export function leasesText(leases: LeaseTotals): string {
  const reasons = Object.entries(leases.units_lapsed_by_reason).filter(([, n]) => n > 0);
  const byReason = reasons.length > 0 ? ` (${reasons.map(([reason, n]) => `${reason.replace(/_/g, ' ')} ${n}`).join(', ')})` : '';
  return `${leases.refills} refills, ${leases.units_returned} units returned, ${leases.units_lapsed} lapsed${byReason}, ${leases.waits} decisions waited`;
}

/** `counter_store_masters` of /rl/v1/info (Redis mode; absent in memory mode or from an older server). */
function mastersOf(info: Record<string, unknown>): MasterHealth[] {
  return Array.isArray(info.counter_store_masters) ? (info.counter_store_masters as MasterHealth[]) : [];
}

function probe(p: ProbeResult): { ok: boolean; status: number; message: string } {
  return { ok: p.ok, status: p.status, message: p.body };
}

function probeText(p: ProbeResult): string {
  return `${p.ok ? 'ok' : 'FAILING'} (${p.status}${p.ok ? '' : `: ${p.body}`})`;
}
