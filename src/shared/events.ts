/**
 * Spec §6: internal, in-process events; no outbound webhooks. Handlers are
 * awaited in registration order, so an emitter that awaits `emit` (the
 * organization-creation hook) sees their writes done, or their error.
 */
export interface EventPayloads {
  ORGANIZATION_CREATED: { organizationId: string; creatorUserId: string };
  EMAIL_SEND_FAILED: { to: string; subject: string; reason: string };
}

export type EventName = keyof EventPayloads;
type Handler<E extends EventName> = (payload: EventPayloads[E]) => Promise<void> | void;

export interface Events {
  on<E extends EventName>(event: E, handler: Handler<E>): () => void;
  emit<E extends EventName>(event: E, payload: EventPayloads[E]): Promise<void>;
}

export function createEvents(): Events {
  // Each list holds the handlers of its own event (on() is typed per event).
  const handlers = new Map<EventName, Handler<never>[]>();
  const of = <E extends EventName>(event: E) => (handlers.get(event) ?? []) as Handler<E>[];
  return {
    on(event, handler) {
      const list = handlers.get(event) ?? [];
      list.push(handler);
      handlers.set(event, list);
      return () => {
        const index = list.indexOf(handler);
        if (index >= 0) list.splice(index, 1);
      };
    },
    async emit(event, payload) {
      for (const handler of of(event)) await handler(payload);
    },
  };
}
