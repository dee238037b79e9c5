import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { SourceMap } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
// @ts-expect-error ws ships no types here (a dependency of wrangler).
import WebSocket from 'ws';

/**
 * A CPU profile of the worker in workerd through wrangler dev's inspector
 * (DevTools protocol), summarised as self time per function: what bounds a
 * Worker scenario. `profileWhile(inspectorPort, load)` starts the profiler,
 * runs `load`, stops it and returns the top entries.
 */
/** The dev bundle's source map: wrangler writes `<dir>/.wrangler/tmp/<build>/<name>.js.map`. */
function findMap(dir: string, name: string): string | null {
  for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true } as {
    withFileTypes: true;
    recursive: true;
  })) {
    if (entry.isFile() && entry.name === `${name}.map`)
      return join(
        (entry as unknown as { parentPath?: string; path?: string }).parentPath ??
          (entry as unknown as { path: string }).path,
        entry.name,
      );
  }
  return null;
}

export async function profileWhile(
  inspectorPort: number,
  load: () => Promise<unknown>,
  top = 25,
  bundleDir?: string,
): Promise<{
  totalMs: number;
  idleMs: number;
  byModule: { module: string; selfMs: number; share: string }[];
  top: { fn: string; selfMs: number; share: string }[];
}> {
  const targets = (await (await fetch(`http://127.0.0.1:${inspectorPort}/json`)).json()) as {
    webSocketDebuggerUrl: string;
    title?: string;
  }[];
  const target = targets.find((t) => !/devtools|internal/i.test(t.title ?? '')) ?? targets[0];
  if (!target) throw new Error('no inspector target');
  const ws = new WebSocket(target.webSocketDebuggerUrl);
  await new Promise((ok, fail) => {
    ws.once('open', ok);
    ws.once('error', fail);
  });
  let id = 0;
  const pending = new Map<number, (result: any) => void>();
  ws.on('message', (data: unknown) => {
    const message = JSON.parse(String(data)) as { id?: number; result?: unknown };
    if (message.id !== undefined) pending.get(message.id)?.(message.result);
  });
  const send = (method: string, params: Record<string, unknown> = {}) =>
    new Promise<any>((ok) => {
      const n = ++id;
      pending.set(n, ok);
      ws.send(JSON.stringify({ id: n, method, params }));
    });
  try {
    await send('Profiler.enable');
    await send('Profiler.setSamplingInterval', { interval: 200 });
    await send('Profiler.start');
    await load();
    const { profile } = (await send('Profiler.stop')) as {
      profile: {
        nodes: {
          id: number;
          callFrame: { functionName: string; url: string; lineNumber: number; columnNumber: number };
        }[];
        samples: number[];
        timeDeltas: number[];
      };
    };
    const maps = new Map<string, SourceMap | null>();
    const mapFor = (url: string) => {
      if (!maps.has(url)) {
        let map: SourceMap | null = null;
        try {
          const path = url.startsWith('file:') ? fileURLToPath(url) : url;
          const file = existsSync(`${path}.map`)
            ? `${path}.map`
            : bundleDir
              ? findMap(bundleDir, path.split('/').pop()!)
              : null;
          if (file) map = new SourceMap(JSON.parse(readFileSync(file, 'utf8')));
        } catch {
          map = null;
        }
        maps.set(url, map);
      }
      return maps.get(url)!;
    };
    /** The package (node_modules/<name>) or project file a frame's code comes from. */
    const moduleOf = (frame: { url: string; lineNumber: number; columnNumber: number }) => {
      if (!frame.url) return '(native / runtime)';
      if (frame.url.startsWith('node-internal:')) return 'workerd node: polyfills';
      const entry = mapFor(frame.url)?.findEntry(frame.lineNumber, frame.columnNumber) as
        | { originalSource?: string }
        | undefined;
      const source = entry?.originalSource ?? frame.url;
      const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(source);
      if (pkg) return pkg[1]!;
      const own = /(src\/.*|scripts\/.*)$/.exec(source);
      return own ? own[1]! : source.split('/').slice(-2).join('/');
    };
    const byModuleUs = new Map<string, number>();
    const self = new Map<number, number>();
    for (const [i, node] of profile.samples.entries())
      self.set(node, (self.get(node) ?? 0) + (profile.timeDeltas[i] ?? 0));
    const byFn = new Map<string, number>();
    let total = 0;
    let idle = 0;
    for (const node of profile.nodes) {
      const us = self.get(node.id) ?? 0;
      total += us;
      const { functionName, url, lineNumber } = node.callFrame;
      if (functionName === '(idle)') idle += us;
      else {
        const module = functionName.startsWith('(') ? functionName : moduleOf(node.callFrame);
        byModuleUs.set(module, (byModuleUs.get(module) ?? 0) + us);
      }
      const file = url.split('/').pop() ?? '';
      const key = `${functionName || '(anonymous)'} ${functionName.startsWith('(') ? '' : moduleOf(node.callFrame)} ${file}:${lineNumber + 1}`;
      byFn.set(key, (byFn.get(key) ?? 0) + us);
    }
    const busy = total - idle;
    return {
      totalMs: Math.round(total / 1000),
      idleMs: Math.round(idle / 1000),
      byModule: [...byModuleUs.entries()]
        .sort((a, b) => b[1] - a[1])
        .slice(0, top)
        .map(([module, us]) => ({
          module,
          selfMs: Math.round(us / 1000),
          share: `${((us / Math.max(busy, 1)) * 100).toFixed(1)}%`,
        })),
      top: [...byFn.entries()]
        .filter(([fn]) => !fn.startsWith('(idle)'))
        .sort((a, b) => b[1] - a[1])
        .slice(0, top)
        .map(([fn, us]) => ({
          fn,
          selfMs: Math.round(us / 1000),
          share: `${((us / Math.max(busy, 1)) * 100).toFixed(1)}%`,
        })),
    };
  } finally {
    ws.close();
  }
}
