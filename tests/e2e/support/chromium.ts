import { existsSync } from 'node:fs';
import { type Browser, chromium } from 'playwright-core';

/** Debian's package (`apt-get install chromium`, done by .ci/e2e.sh); playwright never downloads a browser here. */
export const CHROMIUM_PATH = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

export async function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM_PATH)) {
    throw new Error(
      `${CHROMIUM_PATH} is missing: run \`bash .ci/e2e.sh\` (installs Debian's chromium) or \`apt-get install -y chromium\``,
    );
  }
  return chromium.launch({
    executablePath: CHROMIUM_PATH,
    headless: true,
    args: [
      '--no-sandbox',
      '--disable-background-networking',
      '--disable-component-update',
      '--no-first-run',
      '--disable-gpu',
      '--disable-quic',
      '--disable-sync',
    ],
  });
}
