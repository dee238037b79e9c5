/**
 * The bench's targets beside its figures: the table printed at the end of
 * `npm run bench`. Each target is a ratio to a base measured in the same run
 * (the bare Hono route, the raw hash rate, a bare worker), so it holds on any
 * machine; a scenario left out by --only, or the Worker's when its servers are
 * not at hand, shows as "not run".
 */

export interface MeasuredRow {
  /** The --only name of the scenario that measured it. */
  name: string;
  requestsPerSecond: number;
  p99: number;
  timeouts: number;
  ratio: number;
}

/** tests/perf/bench-staleness.ts's figures. */
export interface StalenessFigure {
  flips: number;
  staleOnWriter: number;
  staleOnOther: number;
  worstMs: number;
  p99Ms: number;
}

export interface WorkerFigure {
  scenario: string;
  ratio: number;
}

type Target =
  | { scenario: string; from: 'node'; name: string; kind: 'ratio'; atLeast: number; base: string }
  | { scenario: string; from: 'node'; name: string; kind: 'p99'; belowMs: number }
  | { scenario: string; from: 'worker'; prefix: string; kind: 'ratio'; atLeast: number; base: string };

/** The ratios of docs/performance.md ("The bench"): one place to read and to move them. */
export const TARGETS: readonly Target[] = [
  {
    scenario: 'GET /api/health, whole chain',
    from: 'node',
    name: 'health',
    kind: 'ratio',
    atLeast: 0.5,
    base: 'ceiling',
  },
  {
    scenario: 'GET /api/session, cookie cache',
    from: 'node',
    name: 'session',
    kind: 'ratio',
    atLeast: 0.11,
    base: 'ceiling',
  },
  {
    scenario: 'GET /api/session, token only',
    from: 'node',
    name: 'session-db',
    kind: 'ratio',
    atLeast: 0.038,
    base: 'ceiling',
  },
  { scenario: 'GET /api/roles', from: 'node', name: 'roles', kind: 'ratio', atLeast: 0.054, base: 'ceiling' },
  { scenario: 'sign-in', from: 'node', name: 'sign-in', kind: 'ratio', atLeast: 0.95, base: 'raw hash rate' },
  { scenario: 'write pair with audit', from: 'node', name: 'roles-write', kind: 'p99', belowMs: 100 },
  {
    scenario: 'write pair with audit + webhook outbox',
    from: 'node',
    name: 'roles-write-webhook',
    kind: 'p99',
    belowMs: 100,
  },
  {
    scenario: 'Worker: GET /api/session, cookie cache',
    from: 'worker',
    prefix: 'W4 ',
    kind: 'ratio',
    atLeast: 0.3,
    base: 'bare worker',
  },
  {
    scenario: 'Worker: GET /api/roles',
    from: 'worker',
    prefix: 'W6 ',
    kind: 'ratio',
    atLeast: 0.15,
    base: 'bare worker',
  },
];

export interface TargetRow {
  scenario: string;
  figure: string;
  target: string;
  result: 'met' | 'missed' | 'not run' | 'report only';
}

/**
 * One row per target; `embedded`: the write pairs must also end without a
 * client timeout there (the embedded engine serializes writes). `idleRssMiB`:
 * the compiled server's resident memory idle on an existing embedded database,
 * reported beside the targets (it has none).
 */
export function targetRows(
  measured: readonly MeasuredRow[],
  worker: readonly WorkerFigure[] | null,
  embedded: boolean,
  idleRssMiB: number | null,
  staleness: StalenessFigure | null = null,
): TargetRow[] {
  const rows = TARGETS.map((t): TargetRow => {
    if (t.from === 'worker') {
      const target = `>= ${t.atLeast} of the ${t.base}`;
      const row = worker?.find((w) => w.scenario.startsWith(t.prefix));
      if (!row) return { scenario: t.scenario, figure: '', target, result: 'not run' };
      return {
        scenario: t.scenario,
        figure: String(row.ratio),
        target,
        result: row.ratio >= t.atLeast ? 'met' : 'missed',
      };
    }
    const row = measured.find((m) => m.name === t.name);
    if (t.kind === 'ratio') {
      const target = `>= ${t.atLeast} of the ${t.base}`;
      if (!row) return { scenario: t.scenario, figure: '', target, result: 'not run' };
      return {
        scenario: t.scenario,
        figure: `${row.ratio} (${row.requestsPerSecond} req/s)`,
        target,
        result: row.ratio >= t.atLeast ? 'met' : 'missed',
      };
    }
    const target = `p99 < ${t.belowMs} ms${embedded ? ', 0 timeouts' : ''}`;
    if (!row) return { scenario: t.scenario, figure: '', target, result: 'not run' };
    const met = row.p99 < t.belowMs && (!embedded || row.timeouts === 0);
    return {
      scenario: t.scenario,
      figure: `p99 ${row.p99} ms, ${row.timeouts} timeouts`,
      target,
      result: met ? 'met' : 'missed',
    };
  });
  rows.push(
    staleness
      ? {
          scenario: `a role change seen by another instance (PostgreSQL, ${staleness.flips} flips)`,
          figure: `worst ${staleness.worstMs} ms, p99 ${staleness.p99Ms} ms; stale answers: ${staleness.staleOnOther} other, ${staleness.staleOnWriter} writer`,
          target: 'worst < 1000 ms, 0 stale on the writer',
          result:
            staleness.flips >= 1000 && staleness.worstMs < 1000 && staleness.staleOnWriter === 0 ? 'met' : 'missed',
        }
      : {
          scenario: 'a role change seen by another instance (PostgreSQL)',
          figure: '',
          target: 'worst < 1000 ms, 0 stale on the writer',
          result: 'not run',
        },
  );
  rows.push({
    scenario: 'idle RSS (report only): npm start, embedded database, 5 s idle',
    figure: idleRssMiB === null ? '' : `${idleRssMiB} MiB`,
    target: '',
    result: idleRssMiB === null ? 'not run' : 'report only',
  });
  return rows;
}
