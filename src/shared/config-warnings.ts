import type { RawConfig } from './config-schema.js';

export interface ConfigWarning {
  level: 'warn' | 'error';
  event: string;
  message: string;
}

/**
 * What a configuration that starts is warned about (README "Configuration"):
 * each is logged once by the entry, under its event name.
 */
export function startupWarnings(
  raw: Pick<RawConfig, 'RATE_LIMIT_ENABLED' | 'CRON_SECRET' | 'EMAIL_API_KEY'>,
  {
    production,
    development,
    hasStore,
    corsDisabled,
  }: { production: boolean; development: boolean; hasStore: boolean; corsDisabled: boolean },
): ConfigWarning[] {
  const warnings: ConfigWarning[] = [];
  if (!raw.RATE_LIMIT_ENABLED && production) {
    warnings.push({
      level: 'error',
      event: 'security.rate_limit_disabled',
      message: 'RATE_LIMIT_ENABLED=false in production: no request is rate limited',
    });
  }
  if (raw.RATE_LIMIT_ENABLED && !hasStore) {
    warnings.push({
      level: 'warn',
      event: 'config.rate_limit_memory_store',
      message: 'KV_REST_API_URL/KV_REST_API_TOKEN unset: rate limits use an in-memory store of this process only',
    });
  }
  if (!raw.CRON_SECRET && !development) {
    warnings.push({
      level: 'warn',
      event: 'config.cron_secret_missing',
      message: 'CRON_SECRET unset: scheduled-job endpoints refuse every caller',
    });
  }
  if (!raw.EMAIL_API_KEY && production) {
    warnings.push({
      level: 'error',
      event: 'config.email_disabled',
      message: 'EMAIL_API_KEY unset in production: no email is delivered, so sign-up cannot complete',
    });
  }
  if (corsDisabled) {
    warnings.push({
      level: 'warn',
      event: 'config.cors_disabled',
      message: 'CORS_ORIGIN=* in production disables CORS: no cross-origin browser access',
    });
  }

  return warnings;
}
