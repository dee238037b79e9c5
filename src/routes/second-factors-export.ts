import { z } from '@hono/zod-openapi';
import type { secondFactorsOf } from '../db/queries/second-factors.js';

/** The account export's second factors: metadata only (no secret, no backup code, no key material). */
export const SecondFactorsExportSchema = {
  twoFactor: z
    .object({ enabled: z.boolean(), createdAt: z.iso.datetime(), backupCodesRemaining: z.number().int() })
    .nullable(),
  passkeys: z.array(
    z.object({
      id: z.uuid(),
      name: z.string().nullable(),
      deviceType: z.string(),
      backedUp: z.boolean(),
      transports: z.array(z.string()),
      aaguid: z.string().nullable(),
      createdAt: z.iso.datetime(),
    }),
  ),
};

export function secondFactorsJson({ totp, passkeys }: Awaited<ReturnType<typeof secondFactorsOf>>) {
  return {
    twoFactor: totp ? { ...totp, createdAt: totp.createdAt.toISOString() } : null,
    passkeys: passkeys.map((p) => ({ ...p, createdAt: p.createdAt.toISOString() })),
  };
}
